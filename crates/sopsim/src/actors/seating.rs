//! Who takes a round's turns: each role's players in a state (one agent, or a
//! population's members), seated in the order of the roles.

use std::collections::HashMap;

use crate::error::SimError;
use crate::scenario::Players;

/// One turn of a round: the role, its player's name, and whatever reaches the player
/// (an actor's address in a run).
pub(super) struct Seat<A> {
    pub role: String,
    pub name: String,
    pub player: A,
}

/// Who plays each role in each state, as the scenario casts them.
pub(super) struct Seating {
    players: Players,
}

impl Seating {
    pub(super) fn new(players: Players) -> Self {
        Self { players }
    }

    /// The agents who play `role` in `state`: one, or a population's members.
    pub(super) fn players(&self, state: &str, role: &str) -> &[String] {
        self.players
            .get(state)
            .and_then(|p| p.get(role))
            .map_or(&[], Vec::as_slice)
    }

    /// How many turns a round of `roles` takes in `state`: one per player.
    pub(super) fn count(&self, state: &str, roles: &[String]) -> u64 {
        roles
            .iter()
            .map(|r| self.players(state, r).len() as u64)
            .sum()
    }

    /// Each turn of `roles` in `state`, in order; a role nobody plays, or a player
    /// `reach` does not know, is the scenario's error naming the state and the role.
    pub(super) fn seats<A: Clone>(
        &self,
        state: &str,
        roles: &[String],
        reach: &HashMap<String, A>,
    ) -> Result<Vec<Seat<A>>, SimError> {
        let no_agent = |role: &str| SimError::NoAgent {
            state: state.to_string(),
            role: role.to_string(),
        };
        let mut seats = Vec::new();
        for role in roles {
            let players = self.players(state, role);
            if players.is_empty() {
                return Err(no_agent(role));
            }
            for name in players {
                let player = reach.get(name).cloned().ok_or_else(|| no_agent(role))?;
                seats.push(Seat {
                    role: role.clone(),
                    name: name.clone(),
                    player,
                });
            }
        }
        Ok(seats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seating() -> Seating {
        let mut players = Players::new();
        players.entry("play".into()).or_default().extend([
            ("Host".to_string(), vec!["Ada".to_string()]),
            (
                "Player".to_string(),
                vec!["P1".to_string(), "P2".to_string(), "P3".to_string()],
            ),
        ]);
        Seating::new(players)
    }

    fn reach(names: &[&str]) -> HashMap<String, usize> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), i))
            .collect()
    }

    #[test]
    fn a_round_seats_every_player_of_each_role_in_the_order_of_the_roles() {
        let s = seating();
        let roles = ["Player".to_string(), "Host".to_string()];
        assert_eq!(s.count("play", &roles), 4);
        let seats = s
            .seats("play", &roles, &reach(&["Ada", "P1", "P2", "P3"]))
            .unwrap();
        let seated: Vec<(&str, &str, usize)> = seats
            .iter()
            .map(|s| (s.role.as_str(), s.name.as_str(), s.player))
            .collect();
        assert_eq!(
            seated,
            [
                ("Player", "P1", 1),
                ("Player", "P2", 2),
                ("Player", "P3", 3),
                ("Host", "Ada", 0)
            ]
        );
    }

    #[test]
    fn a_role_nobody_plays_or_a_player_out_of_reach_names_the_state_and_role() {
        let s = seating();
        assert_eq!(s.count("elsewhere", &["Host".to_string()]), 0);
        for (state, role, known) in [
            ("play", "Judge", &["Ada", "P1", "P2", "P3"][..]),
            ("elsewhere", "Host", &["Ada"][..]),
            ("play", "Player", &["Ada", "P1"][..]),
        ] {
            let err = s
                .seats(state, &[role.to_string()], &reach(known))
                .err()
                .unwrap();
            assert!(
                matches!(&err, SimError::NoAgent { state: st, role: r } if st == state && r == role),
                "{err}"
            );
        }
    }
}
