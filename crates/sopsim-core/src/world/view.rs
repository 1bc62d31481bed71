//! Texts that show the world: a prompt's `{{ world.fish }}`, `{{ me.wallet }}`,
//! `{{ round }}` (the round being played, from 1) and `{{ rounds }}` (the rounds
//! played), rendered from a [`WorldView`]. A text without `{{` is left as it is, and
//! a scenario without a world shows its texts as written.

use std::borrow::Cow;
use std::sync::Arc;

use minijinja::value::Value;

use super::{scope::Me, WorldView};
use crate::scenario::expr;

/// `me` for agent number `agent`: its per-agent variables.
pub fn me_value(view: &WorldView, agent: u32) -> Value {
    Value::from_object(Me {
        values: (*view.per_agent).clone(),
        agent: agent as usize,
    })
}

/// A number as a prompt shows it: a whole one without a decimal point (`80`, not
/// `80.0`).
pub fn shown(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}

/// `text` with the world's values shown, as agent number `agent` sees them (`None`:
/// no agent, no `me`); `extra` adds names (a strategy's `choice`). A text that cannot
/// be rendered (validation refuses those) is shown as written.
pub fn render<'a>(
    text: &'a str,
    view: &WorldView,
    agent: Option<u32>,
    extra: &[(&str, Value)],
) -> Cow<'a, str> {
    if !expr::is_template(text) {
        return Cow::Borrowed(text);
    }
    let world: Value = view
        .globals
        .iter()
        .map(|(k, v)| (k.as_str(), shown(*v)))
        .collect();
    let mut ctx: Vec<(&str, Value)> = vec![
        ("world", world),
        ("round", Value::from(view.rounds + 1)),
        ("rounds", Value::from(view.rounds)),
    ];
    if let Some(agent) = agent {
        let me: Value = view
            .per_agent
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), shown(*v.get(agent as usize)?))))
            .collect();
        ctx.push(("me", me));
    }
    ctx.extend(extra.iter().cloned());
    let ctx: Value = ctx.into_iter().collect();
    match expr::render(text, ctx) {
        Ok(rendered) => Cow::Owned(rendered),
        Err(_) => Cow::Borrowed(text),
    }
}

/// A world view and the agent it is rendered for, as prompts carry it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub view: Arc<WorldView>,
    pub agent: Option<u32>,
}

impl Seen {
    pub fn render<'a>(&self, text: &'a str) -> Cow<'a, str> {
        render(text, &self.view, self.agent, &[])
    }
}

/// `state` with the world's values shown in its texts (its scene, opening line and
/// each role's instructions and question), as agent number `agent` sees them; `None`
/// when none of its texts shows anything, and the state is used as it is.
pub fn render_state(
    state: &crate::scenario::State,
    view: &WorldView,
    agent: Option<u32>,
) -> Option<crate::scenario::State> {
    let shows = |t: &Option<String>| t.as_deref().is_some_and(expr::is_template);
    let any = expr::is_template(&state.environment_prompt)
        || shows(&state.begin_query)
        || state.components.values().any(|c| {
            [&c.style, &c.task, &c.rule, &c.output, &c.last]
                .into_iter()
                .any(shows)
                || c.choice.as_ref().is_some_and(|c| shows(&c.prompt))
        });
    if !any {
        return None;
    }
    let fill = |t: &mut String| {
        if let Cow::Owned(r) = render(t, view, agent, &[]) {
            *t = r;
        }
    };
    let fill_opt = |t: &mut Option<String>| {
        if let Some(t) = t {
            fill(t);
        }
    };
    let mut state = state.clone();
    fill(&mut state.environment_prompt);
    fill_opt(&mut state.begin_query);
    for c in state.components.values_mut() {
        for t in [
            &mut c.style,
            &mut c.task,
            &mut c.rule,
            &mut c.output,
            &mut c.last,
        ] {
            fill_opt(t);
        }
        if let Some(choice) = &mut c.choice {
            fill_opt(&mut choice.prompt);
        }
    }
    Some(state)
}

/// The options of a numeric choice bounded by `at_most` (a formula over the world):
/// those at most its value, and at least the first.
pub fn bounded_options(
    options: &[String],
    at_most: &str,
    view: &WorldView,
    agent: Option<u32>,
) -> Result<Vec<String>, String> {
    let world: Value = view.globals.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut ctx: Vec<(&str, Value)> = vec![
        ("world", world),
        ("round", Value::from(view.rounds + 1)),
        ("rounds", Value::from(view.rounds)),
    ];
    if let Some(agent) = agent {
        ctx.push(("me", me_value(view, agent)));
    }
    let ctx: Value = ctx.into_iter().collect();
    let env = expr::environment();
    let bound = crate::scenario::compile_formula(&env, at_most)
        .map_err(|e| crate::error_chain::chain(&e))?
        .eval(ctx)
        .map_err(|e| format!("cannot evaluate: {e}"))?;
    let bound = expr::number(&bound)?;
    let kept: Vec<String> = options
        .iter()
        .filter(|o| o.trim().parse::<f64>().is_ok_and(|x| x <= bound + 1e-9))
        .cloned()
        .collect();
    Ok(if kept.is_empty() {
        options.iter().take(1).cloned().collect()
    } else {
        kept
    })
}

/// A strategy's line: `say` with the world's values and its `choice` shown.
pub fn render_say(say: &str, view: &WorldView, agent: u32, choice: &str) -> String {
    render(say, view, Some(agent), &[("choice", Value::from(choice))]).into_owned()
}
