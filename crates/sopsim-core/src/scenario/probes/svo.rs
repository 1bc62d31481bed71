//! The Social Value Orientation slider measure (Murphy, Ackermann and Handgraaf 2011,
//! "Measuring Social Value Orientation", Judgment and Decision Making 6(8):771–781):
//! its six primary items, each nine allocations of money between the one answering
//! and another person, and their scoring as an angle and a category. The items are
//! the authors' paper form as the oTree app chapkovski/svo (`svo_choices.csv`) and
//! nodeGame's `SVOGauge` widget copy it, value for value.

/// The six primary items: nine (self, other) allocations each, left to right.
pub const ITEMS: [[(u8, u8); 9]; 6] = [
    [
        (85, 85),
        (85, 76),
        (85, 68),
        (85, 59),
        (85, 50),
        (85, 41),
        (85, 33),
        (85, 24),
        (85, 15),
    ],
    [
        (85, 15),
        (87, 19),
        (89, 24),
        (91, 28),
        (93, 33),
        (94, 37),
        (96, 41),
        (98, 46),
        (100, 50),
    ],
    [
        (50, 100),
        (54, 98),
        (59, 96),
        (63, 94),
        (68, 93),
        (72, 91),
        (76, 89),
        (81, 87),
        (85, 85),
    ],
    [
        (50, 100),
        (54, 89),
        (59, 79),
        (63, 68),
        (68, 58),
        (72, 47),
        (76, 36),
        (81, 26),
        (85, 15),
    ],
    [
        (100, 50),
        (94, 56),
        (88, 63),
        (81, 69),
        (75, 75),
        (69, 81),
        (63, 88),
        (56, 94),
        (50, 100),
    ],
    [
        (100, 50),
        (98, 54),
        (96, 59),
        (94, 63),
        (93, 68),
        (91, 72),
        (89, 76),
        (87, 81),
        (85, 85),
    ],
];

/// An item's nine allocations as an agent is offered them.
pub fn options(item: usize) -> Vec<String> {
    ITEMS[item]
        .iter()
        .map(|(me, other)| format!("You get {me}, the other person gets {other}"))
        .collect()
}

/// The SVO angle in degrees of the positions chosen on the six items (0 to 8 each):
/// arctan((mean other − 50) / (mean self − 50)). `None` unless six positions are
/// given, each on the slider.
pub fn angle(positions: &[usize]) -> Option<f64> {
    if positions.len() != ITEMS.len() || positions.iter().any(|p| *p > 8) {
        return None;
    }
    let chosen = positions.iter().zip(&ITEMS).map(|(p, item)| item[*p]);
    let (me, other) = chosen.fold((0.0, 0.0), |(m, o), (a, b)| {
        (m + f64::from(a), o + f64::from(b))
    });
    let n = ITEMS.len() as f64;
    // Every item 1 answer pays self 85, so the mean for self is above 50.
    Some(((other / n - 50.0) / (me / n - 50.0)).atan().to_degrees())
}

/// The categories, from the most to the least concerned with the other person.
pub const CATEGORIES: [&str; 4] = ["altruistic", "prosocial", "individualistic", "competitive"];

/// The category of an angle, upper bounds inclusive as the published cut points are
/// used: altruistic above 57.15°, prosocial above 22.45°, individualistic above
/// −12.04°, else competitive.
pub fn category(angle: f64) -> &'static str {
    match angle {
        a if a > 57.15 => "altruistic",
        a if a > 22.45 => "prosocial",
        a if a > -12.04 => "individualistic",
        _ => "competitive",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Angles computed with the reference scoring (chapkovski/svo's `get_svo_angle`).
    #[test]
    fn answers_score_as_the_reference_scores_them() {
        for (positions, degrees, kind) in [
            ([0, 0, 0, 0, 0, 0], 30.465544919459887, "prosocial"),
            ([8, 8, 8, 8, 8, 8], 14.743562836470739, "individualistic"),
            ([0, 8, 0, 0, 8, 8], 61.38954033403479, "altruistic"),
            ([8, 0, 8, 8, 0, 0], -16.260204708311957, "competitive"),
            ([0, 0, 1, 6, 5, 1], 22.449124518333043, "individualistic"),
            ([0, 0, 5, 3, 0, 5], 22.4536099789992, "prosocial"),
            ([7, 2, 8, 8, 0, 0], -12.030596096537865, "individualistic"),
        ] {
            let a = angle(&positions).unwrap();
            assert!((a - degrees).abs() < 1e-9, "{positions:?}: {a}");
            assert_eq!(category(a), kind);
        }
        assert_eq!(angle(&[0, 0, 0]), None);
        assert_eq!(angle(&[9, 0, 0, 0, 0, 0]), None);
        assert_eq!(options(0)[0], "You get 85, the other person gets 85");
    }
}
