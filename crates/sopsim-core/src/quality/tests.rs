//! The reply-quality checks, on the texts a reader flagged.

use super::*;
use crate::memory::Message;

/// The checks without embeddings.
impl Checker {
    fn record_plain(&mut self, m: &Message) {
        self.record(m, None);
    }
}

fn instructions(names: &[&str], texts: &[&str]) -> Instructions {
    let mut grams = FxHashSet::default();
    for t in texts {
        grams.extend(gram_hashes(&words(t), ECHO_WORDS));
    }
    Instructions::with(names.iter().map(|n| n.to_string()).collect(), grams)
}

#[test]
fn in_a_population_every_name_is_still_a_label() {
    let names: Vec<String> = (0..500).map(|i| format!("P{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let checker = Checker::new(instructions(&names, &[]));
    for (text, labelled) in [
        ("P57: I will cooperate this round.", true),
        ("I agree. **P301** (Player): and so do I.", true),
        ("P57 and P301 both cooperated last round.", false),
    ] {
        assert_eq!(checker.flaws("P3", text, None).label, labelled, "{text}");
    }
    assert_eq!(
        checker.redraw("P3", "P57: I will cooperate."),
        Some((RedrawCause::Label, "P57:".into()))
    );
}

pub(super) fn checker() -> Checker {
    Checker::new(instructions(
        &["Ada", "Ben", "Mia"],
        &["Give the affirmative opening: argue for the motion in two or three sentences."],
    ))
}

pub(super) fn msg(name: &str, kind: MessageKind, content: &str) -> Message {
    Message {
        seq: 0,
        state: "s".into(),
        visit: 1,
        role: "R".into(),
        name: name.into(),
        content: content.into(),
        kind,
        decision: None,
    }
}

pub(super) const SAID: &str =
    "Car-free centres cut pollution and make the streets safe for every child who walks to school.";

#[test]
fn ten_shared_words_are_a_copy_and_nine_are_not() {
    let mut c = checker();
    c.record_plain(&msg("Ada", MessageKind::Reply, SAID));
    // "centres cut pollution and make the streets safe for every": ten in a row.
    let ten = "I agree: centres CUT pollution, and make the streets safe for every family.";
    assert!(c.flaws("Ben", ten, None).copy);
    // Nine in a row, then a different word.
    let nine = "Yes, centres cut pollution and make the streets safe for some, not all.";
    assert!(!c.flaws("Ben", nine, None).copy);
    // The speaker's own earlier words count too.
    assert!(c.flaws("Ada", ten, None).copy);
}

#[test]
fn a_redraw_steers_away_from_the_copied_words_as_written() {
    let mut c = checker();
    c.record_plain(&msg("Ada", MessageKind::Reply, SAID));
    let copy =
        "Indeed. Car-free centres cut pollution and make the streets safe for every child here.";
    let (cause, avoid) = c.redraw("Ben", copy).unwrap();
    assert_eq!(cause, RedrawCause::Copy);
    assert_eq!(
        avoid,
        "Car-free centres cut pollution and make the streets safe for every child"
    );
    let (cause, avoid) = c.redraw("Ben", "Mia (Moderator): thanks all.").unwrap();
    assert_eq!((cause, avoid.as_str()), (RedrawCause::Label, "Mia:"));
    let echo = "So: give the affirmative opening: argue for the motion in two or three sentences.";
    let (cause, avoid) = c.redraw("Ada", echo).unwrap();
    assert_eq!(cause, RedrawCause::Echo);
    assert_eq!(
        avoid,
        "give the affirmative opening: argue for the motion in two or three sentences"
    );
    let (cause, avoid) = c.redraw("Ada", "Ada argues that cars must go.").unwrap();
    assert_eq!((cause, avoid.as_str()), (RedrawCause::Narration, "Ada"));
    assert_eq!(
        c.redraw("Ada", "Yes."),
        Some((RedrawCause::Empty, String::new()))
    );
    assert_eq!(c.redraw("Ada", "Cars must go, I say."), None);
}

#[test]
fn tool_lines_are_not_copied_from() {
    let mut c = checker();
    c.record_plain(&msg("Ada", MessageKind::ToolResult, SAID));
    assert!(!c.flaws("Ben", SAID, None).copy);
}

#[test]
fn labels_of_others_anywhere_and_ones_own_at_the_opening() {
    let c = checker();
    for (text, speaker) in [
        ("Mia (Moderator): Welcome to the debate!", "Ben"),
        ("Mia: Welcome.", "Ben"),
        ("Good point. Ben (Affirmative_Second): cars must go.", "Ada"),
        ("I agree.\nBen: and so do I.", "Ada"),
        ("**Mia:** Welcome.", "Ben"),
        ("- Mia (Moderator): thanks.", "Ben"),
        ("Ada: Cars must go.", "Ada"),
        ("Ada (Affirmative): Cars must go.", "Ada"),
    ] {
        assert!(c.flaws(speaker, text, None).label, "{speaker}: {text}");
    }
    for (text, speaker) in [
        ("I agree with Ada: cars must go.", "Ben"),
        ("As \"Mia: the sequel\" put it, cars must go.", "Ben"),
        ("Ada's point stands: cars must go.", "Ben"),
        ("Mia asked us to be brief, so: cars must go.", "Ben"),
        ("Cars must go. Ada: that is my view.", "Ada"),
        ("We meet at 10:30 with Mia.", "Ben"),
        ("Adam: not a participant.", "Ben"),
    ] {
        assert!(!c.flaws(speaker, text, None).label, "{speaker}: {text}");
    }
}

#[test]
fn narration_is_ones_own_name_in_the_third_person_at_the_opening() {
    let c = checker();
    assert!(
        c.flaws("Ada", "Ada argues that cars must go.", None)
            .narration
    );
    assert!(c.flaws("Ada", "**Ada** should win this.", None).narration);
    assert!(
        c.flaws("Ada", "Ada (Affirmative) asks Ben to answer.", None)
            .narration
    );
    assert!(
        c.flaws("Ada", "\"Ada believes cars must go.", None)
            .narration
    );
    for text in [
        "Ada's point stands: cars must go.",
        "Ada: cars must go.",
        "Ada, Ben and I agree.",
        "I argue, as Ada argues, that cars must go.",
        "Ben argues that cars must go, and I agree.",
    ] {
        assert!(!c.flaws("Ada", text, None).narration, "{text}");
    }
}

#[test]
fn a_speaker_naming_itself_after_a_comma_is_narration() {
    let c = checker();
    for text in [
        "Oh, hello! Well, Ada, first of all, cars must go.",
        "Yes, Ada agreed! Cars must go.",
        "Cars must go, Ada.",
    ] {
        assert!(c.flaws("Ada", text, None).narration, "{text}");
    }
    for text in [
        "Thank you, Ben, for that point.",
        "My name, Ada Lovelace, is on the petition.",
        "Cars must go, Adams Street first.",
    ] {
        assert!(!c.flaws("Ada", text, None).narration, "{text}");
    }
}

#[test]
fn reporting_on_others_without_taking_part_is_narration() {
    let c = checker();
    for text in [
        "Ben argues that cars must go. He believes the air is cleaner.",
        "Mia supports the ban as she sees it happening.",
    ] {
        assert!(c.flaws("Ada", text, None).narration, "{text}");
    }
    for text in [
        "Ben argues that cars must go. You should hear the doctors.",
        "Ben's street was full of cafés; ours can be too.",
        "Buses come twice an hour. Ben argues otherwise.",
    ] {
        assert!(!c.flaws("Ada", text, None).narration, "{text}");
    }
}

#[test]
fn eight_words_of_the_instructions_are_an_echo_and_seven_are_not() {
    let c = checker();
    assert!(
        c.flaws(
            "Ada",
            "Cleo, give the affirmative opening: argue for the motion in two sentences.",
            None
        )
        .echo
    );
    assert!(
        !c.flaws(
            "Ada",
            "My affirmative opening: argue for the motion, in short.",
            None
        )
        .echo
    );
}

#[test]
fn fewer_than_three_words_is_empty() {
    let c = checker();
    assert!(c.flaws("Ada", "Yes, indeed!", None).empty);
    assert!(c.flaws("Ada", "  ", None).empty);
    assert!(!c.flaws("Ada", "Yes, indeed, cars.", None).empty);
}

#[test]
fn a_role_as_a_label_is_a_label() {
    let mut made = instructions(&["Dave", "Mark"], &[]);
    made.roles = ["Union_Rep".to_string(), "Management".to_string()].into();
    let c = Checker::new(made);
    assert_eq!(
        c.redraw("Dave", "Union_Rep:\nWe ask for 7%."),
        Some((RedrawCause::Label, "Union_Rep:".into()))
    );
    assert!(
        !c.flaws("Dave", "Management offered 3%: too little.", None)
            .label
    );
}

#[test]
fn nothing_but_names_and_roles_is_empty() {
    let mut made = instructions(&["Ada", "Ben", "Mia"], &[]);
    made.roster = Arc::new(
        ["Ada", "Ben", "Mia", "Moderator", "Affirmative_Second"]
            .into_iter()
            .flat_map(words)
            .collect(),
    );
    let c = Checker::new(made);
    assert!(
        c.flaws(
            "Ada",
            "Ben.\nMia (Moderator).\nBen (Affirmative_Second).",
            None
        )
        .empty
    );
    assert!(!c.flaws("Ada", "Ben. Mia. Cars must go.", None).empty);
}

#[test]
fn counts_and_rates_cover_replies_only_and_distinct_bigrams_are_shared() {
    let mut c = checker();
    c.record_plain(&msg(
        "Mia",
        MessageKind::Opening,
        "Welcome. Affirmative, please open.",
    ));
    c.record_plain(&msg(
        "Ada",
        MessageKind::Reply,
        "Ada argues cars must go, cars must go.",
    ));
    c.record_plain(&msg("Ben", MessageKind::Reply, "Mia: yes"));
    c.record_plain(&msg("Ben", MessageKind::Choice, "COOPERATE"));
    let q = c.summary();
    assert_eq!(
        (q.replies, q.copy, q.label, q.narration, q.echo, q.empty),
        (2, 0, 1, 1, 0, 1)
    );
    assert_eq!(q.rates.label, Some(0.5));
    // Bigrams: ada argues, argues cars, cars must, must go, go cars, cars must,
    // must go | mia yes: 8 in all, 6 distinct.
    assert_eq!(q.distinct_2, Some(6.0 / 8.0));
    assert_eq!(Checker::default().summary().rates.copy, None);
}

#[test]
fn a_reply_restating_an_earlier_message_is_a_paraphrase_when_they_are_counted() {
    let said = msg(
        "Ada",
        MessageKind::Opening,
        "Closing the car park brings children a safe park.",
    );
    let again = msg(
        "Ben",
        MessageKind::Reply,
        "A park instead of the car park: safe for children.",
    );
    let other = msg(
        "Cleo",
        MessageKind::Reply,
        "The buses on Sunday worry me most.",
    );
    let mut counted = checker().counting_paraphrases();
    for m in [&said, &again, &other] {
        counted.record_plain(m);
    }
    let q = counted.summary();
    assert_eq!((q.replies, q.paraphrase), (2, Some(1)));
    assert_eq!(q.rates.paraphrase, Some(0.5));
    let mut uncounted = checker();
    for m in [&said, &again, &other] {
        uncounted.record_plain(m);
    }
    assert_eq!(uncounted.summary().paraphrase, None);
}

#[test]
fn declaring_the_other_side_of_ones_stake_is_off_it() {
    let mut made = instructions(&["Ada", "Ben", "Mia"], &[]);
    made.sides = Arc::new(
        [("Ben", "I am for the ban. I live on Market Street.")]
            .into_iter()
            .filter_map(|(n, stake)| side::of_stake(stake).map(|s| (n.to_string(), s)))
            .collect(),
    );
    let mut checker = Checker::new(made);
    let turncoat = "I am not for the ban. My street was quiet.";
    assert!(checker.flaws("Ben", turncoat, None).off_stake);
    assert_eq!(
        checker.redraw("Ben", turncoat),
        None,
        "counted, not drawn again"
    );
    assert!(
        !checker
            .flaws("Ben", "I am for the ban: cafés were full.", None)
            .off_stake
    );
    assert!(
        !checker.flaws("Ada", turncoat, None).off_stake,
        "no side of her own"
    );
    checker.record_plain(&msg("Ben", MessageKind::Reply, turncoat));
    assert_eq!(checker.summary().off_stake, Some(1));
    assert_eq!(
        Checker::new(instructions(&["Ada"], &[]))
            .summary()
            .off_stake,
        None,
        "nobody's side declared, no embeddings: not measured"
    );
}

#[test]
fn an_assistant_declining_is_a_refusal_wherever_it_is_and_is_drawn_again() {
    let c = checker();
    for text in [
        "I'm sorry, but I can't assist with that request.",
        "The ban helps asthma. I’m sorry, but I cannot continue this debate.",
        "As an AI, I have no view on parking in the old town.",
    ] {
        let f = c.flaws("Ada", text, None);
        assert!(f.refusal, "{text}");
        let (cause, avoid) = c.redraw("Ada", text).unwrap();
        assert_eq!(cause, RedrawCause::Refusal, "{text}");
        assert!(
            text.contains(&avoid) && !avoid.is_empty(),
            "{avoid:?} as written in {text}"
        );
    }
    for text in [
        "I'm sorry, but the bridge closes at six, so we need another plan.",
        "We can't assist every shop, but the bakery needs its deliveries.",
    ] {
        assert!(!c.flaws("Ada", text, None).refusal, "{text}");
        assert!(
            !c.flaws("Ada", text, None).stage,
            "an apology in character: {text}"
        );
    }
}
