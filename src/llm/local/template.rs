//! Rendering chat messages with the model's own chat template (the Jinja template in
//! the GGUF file), or ChatML when the file has none.

use minijinja::{context, Environment};

use crate::llm::{ChatMessage, ChatRole};

pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

impl ChatTemplate {
    pub fn new(source: Option<String>, bos: Option<String>, eos: String) -> Result<Self, String> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template_owned("chat", source.unwrap_or_else(|| CHATML.to_string()))
            .map_err(|e| format!("chat template: {e}"))?;
        Ok(Self {
            env,
            bos: bos.unwrap_or_default(),
            eos,
        })
    }

    /// The prompt text for `messages`, ending where the assistant's reply begins.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, String> {
        let msgs: Vec<minijinja::Value> = messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    ChatRole::System => "system",
                    ChatRole::User => "user",
                    ChatRole::Assistant => "assistant",
                };
                context! { role => role, content => m.content.clone() }
            })
            .collect();
        let tmpl = self.env.get_template("chat").map_err(|e| e.to_string())?;
        tmpl.render(context! { messages => msgs, add_generation_prompt => true, bos_token => self.bos, eos_token => self.eos })
            .map_err(|e| format!("chat template: {e}"))
    }
}
