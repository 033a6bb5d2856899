//! OpenAI-style errors: `{"error":{"message":..,"type":..,"param":..,"code":..}}` with the HTTP
//! status the official API uses, so the official clients raise the matching exception
//! (400 BadRequestError, 404 NotFoundError, 413, 429/503 retried after Retry-After, ...).

use serde_json::{json, Value};

#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// OpenAI's `type`: invalid_request_error, server_error, ...
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<String>,
    /// Seconds for a Retry-After header.
    pub retry_after: Option<u32>,
    /// Methods for an Allow header (405).
    pub allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
            allow: None,
        }
    }

    /// 400 for a request whose content is wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request_error", message)
    }

    /// 400 naming the offending field.
    pub fn param(param: &str, code: &str, message: impl Into<String>) -> Self {
        Self::invalid(message).with_param(param).with_code(code)
    }

    pub fn with_param(mut self, p: &str) -> Self {
        self.param = Some(p.to_string());
        self
    }

    pub fn with_code(mut self, c: &str) -> Self {
        self.code = Some(c.to_string());
        self
    }

    pub fn server(status: u16, message: impl Into<String>) -> Self {
        Self::new(status, "server_error", message)
    }

    pub fn to_json(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape() {
        let e = ApiError::param("n", "invalid_value", "only n=1 is supported");
        assert_eq!(e.status, 400);
        assert_eq!(
            e.to_json(),
            json!({"error": {"message": "only n=1 is supported", "type": "invalid_request_error",
                             "param": "n", "code": "invalid_value"}})
        );
        assert_eq!(ApiError::invalid("x").to_json()["error"]["param"], Value::Null);
    }
}
