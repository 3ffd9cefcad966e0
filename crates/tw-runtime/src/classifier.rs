//! Asking a language model which capabilities a tool has, over the OpenAI-compatible chat
//! completions API (a local Ollama, llama.cpp's server, vLLM, or a hosted API). The request and
//! the reading of the answer are `tw_core::capability::llm`'s; this is the HTTP around them, with
//! one time limit over the whole exchange. Every failure (unreachable, slow, an error status, an
//! answer that is not what was asked for) is an `Err` saying which, and the caller falls back to
//! the deterministic classifier: registration never depends on the model.

use std::time::Duration;

use tw_core::ToolDefinition;
use tw_core::capability::{Assigned, Catalog, chat_request, parse_chat_answer};

use crate::config::ClassifierSettings;

/// Longest response body read from the endpoint; a classification answer is a few hundred bytes.
const MAX_RESPONSE_BYTES: usize = 256 * 1024;

/// A configured chat endpoint.
#[derive(Debug, Clone)]
pub struct LlmClassifier {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
}

impl LlmClassifier {
    /// The classifier `settings` describe; `None` when no endpoint is configured. An API key named
    /// by `api_key_env` but not set is an error, so a typo is not silently an anonymous request.
    pub fn from_settings(settings: &ClassifierSettings) -> Result<Option<Self>, String> {
        let Some(endpoint) = &settings.endpoint else {
            return Ok(None);
        };
        let api_key = match &settings.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                format!("classifier.api_key_env names {var}, which is not set in the environment")
            })?),
            None => None,
        };
        let timeout = Duration::from_millis(settings.timeout_ms);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        Ok(Some(Self {
            client,
            url: format!("{endpoint}/chat/completions"),
            model: settings.model.clone(),
            api_key,
            timeout,
        }))
    }

    fn describe(&self, e: &reqwest::Error) -> String {
        if e.is_timeout() {
            format!("no answer within {} ms", self.timeout.as_millis())
        } else if e.is_connect() {
            format!("cannot connect to the endpoint: {e}")
        } else {
            format!("the request failed: {e}")
        }
    }

    /// The model's name, recorded with each classification it makes.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Asks the model for `def`'s capabilities.
    pub async fn classify(
        &self,
        def: &ToolDefinition,
        catalog: &Catalog,
    ) -> Result<Vec<Assigned>, String> {
        let response = self
            .complete(&chat_request(def, catalog, &self.model))
            .await?;
        parse_chat_answer(&response, catalog)
    }

    /// Sends one chat-completions request and returns the answer as JSON.
    pub async fn complete(&self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        // The client's time limit covers the whole exchange, from connecting to the last byte.
        let describe = |e: reqwest::Error| self.describe(&e);
        let mut request = self.client.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = request.send().await.map_err(describe)?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "the answer is longer than {MAX_RESPONSE_BYTES} bytes"
                ));
            }
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let text: String = text.chars().take(200).collect();
            return Err(format!("the endpoint answered HTTP {status}: {text}"));
        }
        serde_json::from_slice::<serde_json::Value>(&bytes)
            .map_err(|e| format!("the answer is not JSON: {e}"))
    }
}
