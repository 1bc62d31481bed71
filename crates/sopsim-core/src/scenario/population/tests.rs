//! Populations: expanding a spec into members, their footprint, and the networks.

use super::*;

fn spec(json: Value) -> PopulationSpec {
    serde_json::from_value(json).unwrap()
}

#[test]
fn links_are_counted_before_a_network_is_drawn() {
    let n = 100_000;
    let links = |network: Network| network.expected_links(n, 7);
    assert_eq!(links(Network::Complete), 0, "no list is kept");
    assert_eq!(links(Network::Groups { size: n }), 4_999_950_000);
    // 33,333 whole groups of three (3 links each), and one member left alone.
    assert_eq!(links(Network::Groups { size: 3 }), 99_999);
    assert_eq!(links(Network::Random { p: 1.0 }), 4_999_950_000);
    assert_eq!(links(Network::Random { p: 0.001 }), 4_999_950);
    assert_eq!(links(Network::Ring { k: 4 }), 200_000);
    assert_eq!(links(Network::SmallWorld { k: 6, p: 0.1 }), 300_000);
    assert_eq!(links(Network::ScaleFree { m: 3 }), 300_000);
    let moore = Network::Lattice {
        width: 100,
        neighbourhood: Neighbourhood::Moore,
    };
    assert_eq!(links(moore), 400_000);
    assert_eq!(
        links(Network::File {
            path: "e.csv".into()
        }),
        7
    );
    // Groups of 5 among 12: two whole groups of 10 links, and 2 left over with 1.
    assert_eq!(Network::Groups { size: 5 }.expected_links(12, 0), 21);
}

#[test]
fn members_are_named_by_the_pattern_and_styled_from_their_rows_and_draws() {
    let p = spec(serde_json::json!({
        "name": "P{i}", "count": 3, "roles": {"round": "Player"},
        "style": "{name} is {temper}, aged {age}.",
        "personas": [{"temper": "calm"}, {"temper": "bold"}, {"temper": "shy"}],
        "draw": {"age": {"integers": [20, 20]}}
    }));
    let rows = match &p.personas {
        Some(PersonaSource::Rows(r)) => r.clone(),
        _ => unreachable!(),
    };
    let members = expand("crowd", &p, &rows).unwrap();
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["P1", "P2", "P3"]);
    assert_eq!(members[1].1.style, "P2 is bold, aged 20.");
    assert_eq!(members[2].1.roles["round"], "Player");
    let m = members[2].1.member.as_ref().unwrap();
    assert_eq!((m.population.as_str(), m.index), ("crowd", 2));
}

#[test]
fn draws_are_seeded_by_the_population() {
    let p = spec(serde_json::json!({
        "name": "P{i}", "count": 50, "roles": {"s": "R"}, "style": "{mood}",
        "draw": {"mood": {"one_of": ["a", "b", "c"]}}
    }));
    let styles = |p: &PopulationSpec| -> Vec<String> {
        expand("x", p, &[])
            .unwrap()
            .into_iter()
            .map(|(_, a)| a.style)
            .collect()
    };
    assert_eq!(styles(&p), styles(&p));
    let mut other = p.clone();
    other.seed = Some(1);
    assert_ne!(styles(&p), styles(&other));
    assert!(styles(&p).iter().any(|s| s == "a") && styles(&p).iter().any(|s| s == "c"));
}

#[test]
fn bad_populations_name_their_field() {
    let base = serde_json::json!({"name": "P{i}", "count": 3, "roles": {"s": "R"}});
    let with = |k: &str, v: Value| {
        let mut d = base.clone();
        d[k] = v;
        expand("x", &spec(d), &[]).unwrap_err()
    };
    assert_eq!(with("name", "P".into()).field, "name");
    assert_eq!(with("count", 0.into()).field, "count");
    assert_eq!(with("personas", "people.csv".into()).field, "personas");
    assert_eq!(with("style", "{mood}".into()).field, "style");
    let e = with("draw", serde_json::json!({"age": {"uniform": [5, 1]}}));
    assert_eq!(e.field, "draw.age");
}

#[test]
fn a_row_without_a_field_the_style_uses_is_refused_before_any_member_is_made() {
    let p = spec(serde_json::json!({
        "name": "P{i}", "count": 3, "roles": {"s": "R"}, "style": "I work as a {job}.",
        "personas": [{"job": "baker"}, {"job": "nurse"}, {"hobby": "chess"}]
    }));
    let rows = match &p.personas {
        Some(PersonaSource::Rows(r)) => r.clone(),
        _ => unreachable!(),
    };
    let e = footprint(&p, &rows).unwrap_err();
    assert_eq!(e.field, "personas[2]");
    assert!(e.message.contains("job"), "{}", e.message);
}

#[test]
fn network_parameters_are_checked_against_the_count() {
    assert_eq!(Network::Ring { k: 6 }.check(6).unwrap().0, "k");
    assert_eq!(Network::Ring { k: 3 }.check(10).unwrap().0, "k");
    assert!(Network::Ring { k: 2 }.check(6).is_none());
    assert_eq!(Network::Random { p: 1.5 }.check(10).unwrap().0, "p");
    assert_eq!(
        Network::SmallWorld { k: 4, p: -0.1 }.check(10).unwrap().0,
        "p"
    );
    assert_eq!(Network::ScaleFree { m: 10 }.check(10).unwrap().0, "m");
    let lattice = |width| Network::Lattice {
        width,
        neighbourhood: Neighbourhood::Moore,
    };
    assert_eq!(lattice(4).check(10).unwrap().0, "width");
    assert!(lattice(5).check(25).is_none());
    assert_eq!(Network::Groups { size: 1 }.check(10).unwrap().0, "size");
}
