//! Building scenarios in code, for scripting multi-role conversations from Rust.
//!
//! ```
//! use sopsim_core::scenario::{ScenarioBuilder, StateBuilder};
//! let scenario = ScenarioBuilder::new("interview")
//!     .agent("Ada", |a| a.style("curious").plays("talk", "Interviewer"))
//!     .agent("Bob", |a| a.plays("talk", "Candidate"))
//!     .state("talk", StateBuilder::new(["Interviewer", "Candidate"])
//!         .begin("Interviewer", "Tell me about yourself.")
//!         .max_turns(4)
//!         .next(["end"]))
//!     .build()
//!     .expect("a valid scenario");
//! assert_eq!(scenario.sop.start, "talk");
//! ```

use super::format::*;
use super::load::{validate_built, ScenarioError};

/// Builds a [`Scenario`]; the first state added is the start state.
#[derive(Debug, Clone)]
pub struct ScenarioBuilder {
    scenario: Scenario,
}

impl ScenarioBuilder {
    /// Starts a scenario named `name`, with default settings and no agents or states.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            scenario: Scenario {
                name: name.into(),
                description: String::new(),
                environment: EnvironmentSettings::default(),
                llm: LlmSettings::default(),
                agents: Default::default(),
                populations: Default::default(),
                sop: Sop {
                    start: String::new(),
                    end: "end".into(),
                    max_turns: 200,
                    states: Default::default(),
                },
                tools: Default::default(),
                outcomes: None,
                world: None,
                probes: Default::default(),
                design: Default::default(),
                reference: None,
                judge: None,
                script: None,
            },
        }
    }

    /// Sets the environment's mode (how much history agents share).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.scenario.environment.mode = mode;
        self
    }

    /// Changes the environment settings in place.
    pub fn environment(mut self, f: impl FnOnce(&mut EnvironmentSettings)) -> Self {
        f(&mut self.scenario.environment);
        self
    }

    /// Sets the scenario's default LLM settings.
    pub fn llm(mut self, settings: LlmSettings) -> Self {
        self.scenario.llm = settings;
        self
    }

    /// Adds an agent named `name`, built by `f`.
    pub fn agent(
        mut self,
        name: impl Into<String>,
        f: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> Self {
        let built = f(AgentBuilder(AgentSpec::default())).0;
        self.scenario.agents.insert(name.into(), built);
        self
    }

    /// Adds a state named `name`; the first state added is the start state.
    pub fn state(mut self, name: impl Into<String>, state: StateBuilder) -> Self {
        let name = name.into();
        if self.scenario.sop.start.is_empty() {
            self.scenario.sop.start = name.clone();
        }
        self.scenario.sop.states.insert(name, state.0);
        self
    }

    /// Sets the limit on turns in the whole run.
    pub fn max_turns(mut self, n: u64) -> Self {
        self.scenario.sop.max_turns = n;
        self
    }

    /// Sets the replies for the scripted backend.
    pub fn script(mut self, script: Script) -> Self {
        self.scenario.script = Some(script);
        self
    }

    /// Validates the scenario as if it had been read from a file.
    pub fn build(self) -> Result<Scenario, ScenarioError> {
        validate_built(
            &format!("<scenario {:?}>", self.scenario.name),
            &self.scenario,
        )?;
        Ok(self.scenario)
    }
}

/// Builds one agent.
#[derive(Debug, Clone)]
pub struct AgentBuilder(AgentSpec);

impl AgentBuilder {
    /// Sets how the agent speaks.
    pub fn style(mut self, style: impl Into<String>) -> Self {
        self.0.style = style.into();
        self
    }

    /// The agent plays `role` in `state`.
    pub fn plays(mut self, state: impl Into<String>, role: impl Into<String>) -> Self {
        self.0.roles.insert(state.into(), role.into());
        self
    }

    /// Makes the agent a human, whose turns a person types.
    pub fn human(mut self) -> Self {
        self.0.human = true;
        self
    }

    /// Sets the agent's own LLM settings.
    pub fn llm(mut self, settings: LlmSettings) -> Self {
        self.0.llm = Some(Box::new(settings));
        self
    }
}

/// Builds one state.
#[derive(Debug, Clone)]
pub struct StateBuilder(State);

impl StateBuilder {
    /// Starts a state with these roles, in speaking order.
    pub fn new<I, S>(roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(State {
            roles: roles.into_iter().map(Into::into).collect(),
            ..State::default()
        })
    }

    /// `role` opens every visit by saying `query`.
    pub fn begin(mut self, role: impl Into<String>, query: impl Into<String>) -> Self {
        self.0.begin_role = Some(role.into());
        self.0.begin_query = Some(query.into());
        self
    }

    /// Sets the scene description put in front of every prompt in the state.
    pub fn environment_prompt(mut self, text: impl Into<String>) -> Self {
        self.0.environment_prompt = text.into();
        self
    }

    /// Sets what `role` is told in this state.
    pub fn components(mut self, role: impl Into<String>, components: Components) -> Self {
        self.0.components.insert(role.into(), components);
        self
    }

    /// Sets who speaks next within the state.
    pub fn speaker(mut self, rule: SpeakerRule) -> Self {
        self.0.speaker = rule;
        self
    }

    /// Leaves the state after `n` turns in one visit.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.0.transition.max_turns = Some(n);
        self
    }

    /// Where `max_turns` leads; naming the state itself starts its next round.
    pub fn on_max_turns(mut self, to: impl Into<String>) -> Self {
        self.0.transition.on_max_turns = Some(to.into());
        self
    }

    /// At most `n` visits of this state; a move into it after that goes to `then`.
    pub fn max_visits(mut self, n: u32, then: impl Into<String>) -> Self {
        self.0.transition.max_visits = Some(n);
        self.0.transition.on_max_visits = Some(then.into());
        self
    }

    /// Moves to `to` when the last message contains `keyword`.
    pub fn keyword(mut self, keyword: impl Into<String>, to: impl Into<String>) -> Self {
        self.0.transition.keywords.push(KeywordRule {
            keyword: keyword.into(),
            to: to.into(),
        });
        self
    }

    /// Lets an LLM judge choose, after each turn, between staying and each of `next`.
    pub fn judge(mut self, prompts: JudgePrompts) -> Self {
        self.0.transition.judge = Some(prompts);
        self
    }

    /// Sets the states (or the end) this state may move to.
    pub fn next<I, S>(mut self, next: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.0.next = next.into_iter().map(Into::into).collect();
        self
    }
}
