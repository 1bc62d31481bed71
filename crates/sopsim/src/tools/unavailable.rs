//! The kinds this build left out (by its features): a scenario naming one still loads,
//! and says what is missing where it would run.

#[cfg(not(feature = "openai"))]
mod http {
    use futures::future::BoxFuture;
    use serde_json::{json, Map, Value};
    use sopsim_core::scenario::tool_settings::HttpSettings;

    use crate::tools::kind::{Kind, Start};
    use crate::tools::{ResultObject, RunsIn, Setup, Tool, ToolFailure, ToolSetupError};

    /// An `http` tool whose calls fail: there is no HTTP client to make them.
    struct NoClient;

    impl Start for HttpSettings {
        async fn start(self, _: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
            Ok(Box::new(NoClient))
        }
    }

    impl Kind for NoClient {
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }

        fn runs_in(&self) -> RunsIn<'_> {
            RunsIn::Outside
        }

        fn payload_type(&self) -> &'static str {
            "table"
        }

        fn run_outside<'a>(
            &'a self,
            _: &'a Tool,
            _: &'a Map<String, Value>,
        ) -> Option<BoxFuture<'a, Result<ResultObject, ToolFailure>>> {
            Some(Box::pin(async {
                Err(ToolFailure::unknown(
                    "this sopsim was built without HTTP support (the `openai` feature)",
                ))
            }))
        }
    }
}

/// Without MCP support, a scenario with an `mcp` tool does not start.
#[cfg(not(feature = "mcp"))]
mod mcp {
    use sopsim_core::scenario::tool_settings::McpSettings;

    use crate::tools::kind::{Kind, Start};
    use crate::tools::{Setup, SetupCause, ToolSetupError};

    impl Start for McpSettings {
        async fn start(self, setup: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
            Err(setup.error(&["kind"], SetupCause::NoMcp))
        }
    }
}
