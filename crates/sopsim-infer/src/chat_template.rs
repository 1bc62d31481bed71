//! Rendering chat messages with the model's own chat template (the Jinja template in
//! the GGUF file), as Hugging Face's `apply_chat_template` does: `trim_blocks`,
//! `lstrip_blocks`, loop controls, `raise_exception`, `strftime_now`, its `tojson`
//! (Python's `json.dumps`, not Jinja's HTML-safe one) and messages whose keys keep
//! their order — or ChatML when the file has none. A template comes from a downloaded
//! file, so it runs with a fuel limit: one that loops forever fails instead of hanging.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::error::InferError;

use minijinja::value::{Enumerator, Kwargs, Object, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind, Value};

/// Template instructions one rendering may execute (a long conversation takes a few
/// thousand).
const FUEL: u64 = 20_000_000;

/// A model's chat template, compiled, with its BOS and EOS token texts.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// `datetime.now().strftime(format)`, in UTC: the template sees the clock only when
/// it asks for it (Llama 3's and others' date lines).
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    strftime(&format, secs)
}

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
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// C's `strftime` for `secs` since 1970 in UTC, with the directives chat templates
/// use (`%Y %y %m %d %e %j %H %I %M %S %p %A %a %B %b %%`, and glibc's `-` flag that
/// drops a number's padding, `%-d`). Others are kept as written, as glibc keeps them.
fn strftime(format: &str, secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (hour, minute, second) = (of_day / 3600, of_day / 60 % 60, of_day % 60);
    let weekday = (days + 4).rem_euclid(7) as usize;
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let hour12 = (hour + 11) % 12 + 1;
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let unpadded = chars.next_if_eq(&'-').is_some();
        let number = |out: &mut String, n: i64, width: usize, pad: char| {
            let digits = n.to_string();
            if !unpadded {
                for _ in digits.len()..width {
                    out.push(pad);
                }
            }
            out.push_str(&digits);
        };
        match chars.next() {
            Some('Y') => number(&mut out, y, 4, '0'),
            Some('y') => number(&mut out, y.rem_euclid(100), 2, '0'),
            Some('m') => number(&mut out, i64::from(m), 2, '0'),
            Some('d') => number(&mut out, i64::from(d), 2, '0'),
            Some('e') => number(&mut out, i64::from(d), 2, ' '),
            Some('j') => number(&mut out, yday, 3, '0'),
            Some('H') => number(&mut out, hour, 2, '0'),
            Some('I') => number(&mut out, hour12, 2, '0'),
            Some('M') => number(&mut out, minute, 2, '0'),
            Some('S') => number(&mut out, second, 2, '0'),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('A') => out.push_str(WEEKDAYS[weekday]),
            Some('a') => out.push_str(&WEEKDAYS[weekday][..3]),
            Some('B') => out.push_str(MONTHS[(m - 1) as usize]),
            Some('b') => out.push_str(&MONTHS[(m - 1) as usize][..3]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The day count since 1970-01-01 of a date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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

/// A message as templates see it: a dict whose keys keep their order (`role`, then
/// `content`), as a Python dict does, so `message | tojson` prints what transformers
/// prints.
#[derive(Debug)]
struct Message {
    role: String,
    content: String,
}

impl Object for Message {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "role" => Some(Value::from(self.role.as_str())),
            "content" => Some(Value::from(self.content.as_str())),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["role", "content"])
    }
}

/// How [`tojson`] writes: transformers' `json.dumps(x, ensure_ascii=False,
/// indent=None, separators=None, sort_keys=False)`, each settable by keyword.
struct JsonStyle {
    ensure_ascii: bool,
    /// Written once per level before each item, after a newline; `None`: one line.
    indent: Option<String>,
    item_separator: String,
    key_separator: String,
    sort_keys: bool,
}

impl JsonStyle {
    fn from_kwargs(kwargs: &Kwargs) -> Result<Self, Error> {
        let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
        // Python takes a number of spaces or the indent text itself.
        let indent = match kwargs.get::<Option<Value>>("indent")? {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) => match v.as_str() {
                Some(text) => Some(text.to_string()),
                None => Some(" ".repeat(i64::try_from(v)?.max(0) as usize)),
            },
        };
        let (item_separator, key_separator) = match kwargs.get::<Option<Value>>("separators")? {
            Some(v) if !v.is_none() => {
                let parts: Vec<String> = v
                    .try_iter()?
                    .map(|p| p.as_str().map(str::to_string))
                    .collect::<Option<_>>()
                    .ok_or_else(|| invalid("tojson: separators are two strings"))?;
                match <[String; 2]>::try_from(parts) {
                    Ok([item, key]) => (item, key),
                    Err(_) => return Err(invalid("tojson: separators are two strings")),
                }
            }
            // Python's defaults: no space before a newline when indenting.
            _ if indent.is_some() => (",".into(), ": ".into()),
            _ => (", ".into(), ": ".into()),
        };
        let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
        kwargs.assert_all_used()?;
        Ok(Self {
            ensure_ascii,
            indent,
            item_separator,
            key_separator,
            sort_keys,
        })
    }
}

fn invalid(message: &'static str) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// Transformers' `tojson` filter: Python's `json.dumps` with its keyword arguments
/// (no HTML escaping of `<`, `>`, `&` or `'`; non-ASCII text as it is unless
/// `ensure_ascii`).
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let style = JsonStyle::from_kwargs(&kwargs)?;
    let mut out = String::new();
    write_json(&mut out, value, &style, 0)?;
    Ok(Value::from_safe_string(out))
}

fn write_json(
    out: &mut String,
    value: &Value,
    style: &JsonStyle,
    depth: usize,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number if value.is_integer() => {
            let _ = write!(out, "{value}");
        }
        ValueKind::Number => out.push_str(&python_float(f64::try_from(value.clone())?)),
        ValueKind::String => write_string(out, value.as_str().unwrap_or_default(), style),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, ('[', ']'), &items, style, depth, |out, item| {
                write_json(out, item, style, depth + 1)
            })?;
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if style.sort_keys {
                // As Python sorts the keys themselves: numbers by value.
                keys.sort();
            }
            let mut entries: Vec<(String, Value)> = Vec::new();
            for key in keys {
                let item = value.get_item(&key)?;
                entries.push((json_key(&key)?, item));
            }
            write_container(
                out,
                ('{', '}'),
                &entries,
                style,
                depth,
                |out, (key, item)| {
                    write_string(out, key, style);
                    out.push_str(&style.key_separator);
                    write_json(out, item, style, depth + 1)
                },
            )?;
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

/// `[a, b]` or `{…}`, one item a line when indenting; empty ones stay `[]` and `{}`.
fn write_container<T>(
    out: &mut String,
    (open, close): (char, char),
    items: &[T],
    style: &JsonStyle,
    depth: usize,
    mut item: impl FnMut(&mut String, &T) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    let newline = |out: &mut String, level: usize| {
        if let Some(indent) = &style.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(indent);
            }
        }
    };
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        newline(out, depth + 1);
        item(out, x)?;
    }
    if !items.is_empty() {
        newline(out, depth);
    }
    out.push(close);
    Ok(())
}

/// A dict key as `json.dumps` writes it: strings as they are, numbers, booleans and
/// `None` as their JSON text.
fn json_key(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_string()),
        ValueKind::None | ValueKind::Bool | ValueKind::Number => {
            let mut text = String::new();
            write_json(&mut text, key, &JsonStyle::compact(), 0)?;
            Ok(text)
        }
        kind => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be strings, numbers, booleans or none, not {kind}"),
        )),
    }
}

impl JsonStyle {
    fn compact() -> Self {
        Self {
            ensure_ascii: false,
            indent: None,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            sort_keys: false,
        }
    }
}

/// A JSON string as Python writes it: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other
/// control characters as `\u00xx`, and with `ensure_ascii` everything past ASCII as
/// `\uxxxx` (UTF-16 halves beyond the Basic Multilingual Plane).
fn write_string(out: &mut String, text: &str, style: &JsonStyle) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if style.ensure_ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Python's `repr` writes it: the shortest digits that read back the same,
/// positional from 1e-4 to below 1e16 (with `.0` when whole), else `1e-05`, `1.5e+16`.
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as Python's repr does.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let plain = format!("{x}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

impl ChatTemplate {
    /// Compiles `source`, or ChatML when there is none; `bos` and `eos` are the texts the
    /// template sees as `bos_token` and `eos_token`.
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
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat", source.unwrap_or_else(|| CHATML.to_string()))?;
        Ok(Self {
            env,
            bos: bos.unwrap_or_default(),
            eos,
        })
    }

    /// The prompt text for `messages` (role, content), ending where the assistant's
    /// reply begins. `thinking` is the template's `enable_thinking` (Qwen3's switch; templates
    /// without one ignore it).
    pub fn render(&self, messages: &[(&str, &str)], thinking: bool) -> Result<String, InferError> {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|(role, content)| {
                Value::from_object(Message {
                    role: role.to_string(),
                    content: content.to_string(),
                })
            })
            .collect();
        let tmpl = self.env.get_template("chat")?;
        tmpl.render(context! { messages => msgs, add_generation_prompt => true, bos_token => self.bos, eos_token => self.eos, enable_thinking => thinking })
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
    fn strftime_knows_the_directives_templates_use() {
        // 2024-03-05 14:07:09 UTC; the expected text is Python's `time.strftime`.
        assert_eq!(
            strftime(
                "%Y-%m-%d %H:%M:%S %B %b %A %a %j %p %I %y [%e] %-d %-m %% %Q",
                1_709_647_629
            ),
            "2024-03-05 14:07:09 March Mar Tuesday Tue 065 PM 02 24 [ 5] 5 3 % %Q"
        );
        assert_eq!(
            strftime("%I %p %j %a %e|%-H", 946_598_700),
            "12 AM 365 Fri 31|0"
        );
        for days in [0, 11_016, 19_787, 20_780, -1] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    fn render_one(source: &str, messages: &[(&str, &str)]) -> String {
        ChatTemplate::new(Some(source.into()), None, "</s>".into())
            .unwrap()
            .render(messages, false)
            .unwrap()
    }

    #[test]
    fn thinking_is_the_templates_enable_thinking() {
        let qwen3 = "{{ messages[0]['content'] }}|{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}";
        let t = ChatTemplate::new(Some(qwen3.into()), None, "</s>".into()).unwrap();
        let m = [("user", "hi")];
        assert_eq!(t.render(&m, false).unwrap(), "hi|<think>\n\n</think>\n\n");
        assert_eq!(t.render(&m, true).unwrap(), "hi|");
    }

    #[test]
    fn tojson_writes_what_pythons_json_dumps_writes() {
        let m = [("user", "<b>Tom & Jerry's</b> ünï 中文 👍\n\t\u{1}\\")];
        assert_eq!(
            render_one("{{ messages[0] | tojson }}", &m),
            r#"{"role": "user", "content": "<b>Tom & Jerry's</b> ünï 中文 👍\n\t\u0001\\"}"#
        );
        assert_eq!(
            render_one(
                "{{ messages[0].content | tojson(ensure_ascii=true) }}",
                &[("user", "é👍")]
            ),
            r#""\u00e9\ud83d\udc4d""#
        );
        assert_eq!(
            render_one(
                "{{ {'b': [1, 2.5, none, true], 'a': {}, 'c': 1e-05} | tojson(indent=2, sort_keys=true) }}",
                &m
            ),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"c\": 1e-05\n}"
        );
        assert_eq!(
            render_one(
                "{{ [1.0, 1e16, -0.0, 'x'] | tojson(separators=(',', ':')) }}",
                &m
            ),
            r#"[1.0,1e+16,-0.0,"x"]"#
        );
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
        let InferError::Template(err) = t.render(&[("user", "hi")], false).unwrap_err() else {
            panic!("not a template error");
        };
        assert_eq!(err.kind(), minijinja::ErrorKind::OutOfFuel, "{err}");
    }

    #[test]
    fn whitespace_control_and_loop_controls_as_hugging_face_renders() {
        let src = "{% for m in messages %}\n  {% if m.role == 'system' %}{% continue %}{% endif %}\n[{{ m.content | tojson }}]\n{% endfor %}";
        let t = ChatTemplate::new(Some(src.into()), None, "</s>".into()).unwrap();
        let out = t
            .render(&[("system", "s"), ("user", "a \"b\"")], false)
            .unwrap();
        assert_eq!(out, "[\"a \\\"b\\\"\"]\n");
    }
}
