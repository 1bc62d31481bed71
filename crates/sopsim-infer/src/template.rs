//! Rendering chat messages with the model's own chat template (the Jinja template in
//! the GGUF file), as Hugging Face's `apply_chat_template` does: `trim_blocks`,
//! `lstrip_blocks`, loop controls, `tojson`, `raise_exception` and `strftime_now` —
//! or ChatML when the file has none. A template comes from a downloaded file, so it
//! runs with a fuel limit: one that loops forever fails instead of hanging.

use crate::error::InferError;

use minijinja::{context, Environment, Error, ErrorKind};

/// Template instructions one rendering may execute (a long conversation takes a few
/// thousand).
const FUEL: u64 = 20_000_000;

pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn strftime_now(format: String) -> String {
    // The template sees today's date, as Hugging Face templates expect; nothing else
    // of the clock reaches a prompt.
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    format
        .replace("%Y", &y.to_string())
        .replace("%m", &format!("{m:02}"))
        .replace("%d", &format!("{d:02}"))
        .replace("%B", MONTHS[(m - 1) as usize])
        .replace("%b", &MONTHS[(m - 1) as usize][..3])
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

impl ChatTemplate {
    pub fn new(
        source: Option<String>,
        bos: Option<String>,
        eos: String,
    ) -> Result<Self, InferError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_fuel(Some(FUEL));
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat", source.unwrap_or_else(|| CHATML.to_string()))?;
        Ok(Self {
            env,
            bos: bos.unwrap_or_default(),
            eos,
        })
    }

    /// The prompt text for `messages` (role, content), ending where the assistant's
    /// reply begins.
    pub fn render(&self, messages: &[(&str, &str)]) -> Result<String, InferError> {
        let msgs: Vec<minijinja::Value> = messages
            .iter()
            .map(|(role, content)| context! { role => role, content => content })
            .collect();
        let tmpl = self.env.get_template("chat")?;
        tmpl.render(context! { messages => msgs, add_generation_prompt => true, bos_token => self.bos, eos_token => self.eos })
            .map_err(InferError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_780), (2026, 11, 23));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn a_template_that_never_ends_fails() {
        let t = ChatTemplate::new(
            Some(
                "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
                    .into(),
            ),
            None,
            "</s>".into(),
        )
        .unwrap();
        let InferError::Template(err) = t.render(&[("user", "hi")]).unwrap_err() else {
            panic!("not a template error");
        };
        assert_eq!(err.kind(), minijinja::ErrorKind::OutOfFuel, "{err}");
    }

    #[test]
    fn whitespace_control_and_loop_controls_as_hugging_face_renders() {
        let src = "{% for m in messages %}\n  {% if m.role == 'system' %}{% continue %}{% endif %}\n[{{ m.content | tojson }}]\n{% endfor %}";
        let t = ChatTemplate::new(Some(src.into()), None, "</s>".into()).unwrap();
        let out = t.render(&[("system", "s"), ("user", "a \"b\"")]).unwrap();
        assert_eq!(out, "[\"a \\\"b\\\"\"]\n");
    }
}
