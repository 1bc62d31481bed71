//! Texts that show the world: a prompt's `{{ world.fish }}`, `{{ me.wallet }}`,
//! `{{ round }}` (the round being played, from 1) and `{{ rounds }}` (the rounds
//! played), rendered from a [`WorldView`]. A text that is not a template (no `{{` or
//! `{%`) is left as it is, and a scenario without a world shows its texts as written.
//! A template that fails to render (past the render limit, out of fuel) is an error
//! naming the text, never sent as written.

use minijinja::value::Value;
use std::borrow::Cow;

use super::{scope::Me, WorldError, WorldView};
use crate::scenario::expr;

/// `me` for agent number `agent`: its per-agent variables.
pub fn me_value(view: &WorldView, agent: u32) -> Value {
    Value::from_object(Me {
        values: view.per_agent.clone(),
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
/// no agent, no `me`); `extra` adds names (a strategy's `choice`). The error says why
/// it cannot be rendered.
pub fn render<'a>(
    text: &'a str,
    view: &WorldView,
    agent: Option<u32>,
    extra: &[(&str, Value)],
) -> Result<Cow<'a, str>, String> {
    if !expr::is_template(text) {
        return Ok(Cow::Borrowed(text));
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
    expr::render(text, ctx, view.sizes).map(Cow::Owned)
}

/// `state` with the world's values shown in its texts (its scene, opening line and,
/// for an agent, each role's instructions and question, which may show `me`), as
/// agent number `agent` sees them; `None` when none of its texts shows anything, and
/// the state is used as it is. A text that fails to render is a [`WorldError`]
/// naming it (`sop.states.NAME.FIELD`), the round and why.
pub fn render_state(
    name: &str,
    state: &crate::scenario::State,
    view: &WorldView,
    agent: Option<u32>,
) -> Result<Option<crate::scenario::State>, WorldError> {
    let shows = |t: &Option<String>| t.as_deref().is_some_and(expr::is_template);
    let any = expr::is_template(&state.environment_prompt)
        || shows(&state.begin_query)
        || agent.is_some()
            && state.components.values().any(|c| {
                [&c.style, &c.task, &c.rule, &c.output, &c.last]
                    .into_iter()
                    .any(shows)
                    || c.choice.as_ref().is_some_and(|c| shows(&c.prompt))
            });
    if !any {
        return Ok(None);
    }
    let fill = |t: &mut String, field: &str| -> Result<(), WorldError> {
        match render(t, view, agent, &[]) {
            Ok(Cow::Owned(r)) => *t = r,
            Ok(Cow::Borrowed(_)) => {}
            Err(why) => {
                return Err(WorldError {
                    field: format!("sop.states.{name}.{field}"),
                    round: view.rounds + 1,
                    agent: None,
                    why,
                })
            }
        }
        Ok(())
    };
    let fill_opt = |t: &mut Option<String>, field: &str| match t {
        Some(t) => fill(t, field),
        None => Ok(()),
    };
    let mut state = state.clone();
    fill(&mut state.environment_prompt, "environment_prompt")?;
    fill_opt(&mut state.begin_query, "begin_query")?;
    if agent.is_none() {
        return Ok(Some(state));
    }
    for (role, c) in state.components.iter_mut() {
        for (t, key) in [
            (&mut c.style, "style"),
            (&mut c.task, "task"),
            (&mut c.rule, "rule"),
            (&mut c.output, "output"),
            (&mut c.last, "last"),
        ] {
            fill_opt(t, &format!("components.{role}.{key}"))?;
        }
        if let Some(choice) = &mut c.choice {
            fill_opt(
                &mut choice.prompt,
                &format!("components.{role}.choice.prompt"),
            )?;
        }
    }
    Ok(Some(state))
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
    let leaf = expr::template_leaf;
    let bounded = crate::scenario::Bounded {
        leaf: &leaf,
        sizes: view.sizes,
    };
    let bound = crate::scenario::compile_formula(&env, at_most, bounded)
        .map_err(|e| crate::error_chain::chain(&e))?
        .eval(ctx)
        .map_err(|e| expr::evaluation_error(&e))?;
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

/// A strategy's line: `say` with the world's values and its `choice` shown, or why
/// it cannot be rendered.
pub fn render_say(say: &str, view: &WorldView, agent: u32, choice: &str) -> Result<String, String> {
    render(say, view, Some(agent), &[("choice", Value::from(choice))]).map(Cow::into_owned)
}
