//! The commands a Redis user may not run (`lua/check_access.lua`).

use super::compiled::Scripts;
use super::reply::{Field, wrong_shape};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

impl Scripts {
    /// The first of `commands` (each a command with its arguments) the connected user may not
    /// run; `None` when every one is allowed or the server cannot say (Redis before 7.0).
    /// `key` is declared as the script's key (one the commands name).
    pub async fn denied_command<C: ConnectionLike>(
        &self,
        con: &mut C,
        key: &str,
        commands: &[Vec<String>],
    ) -> RedisResult<Option<Vec<String>>> {
        let mut call = self.check_access.prepare_invoke();
        call.key(key);
        for command in commands {
            call.arg(serde_json::to_string(command).unwrap_or_else(|_| "[]".into()));
        }
        denied(call.invoke_async(con).await?)
    }
}

/// Decodes the reply: nil, or the refused command as the JSON array it was sent as.
fn denied(reply: Value) -> RedisResult<Option<Vec<String>>> {
    let Some(json) = Field::whole("check_access", "refused", reply).optional_text()? else {
        return Ok(None);
    };
    serde_json::from_str(&json).map(Some).map_err(|e| {
        let detail = format!("`refused` should be a JSON array of strings: {e}");
        wrong_shape("check_access", &detail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_nil_or_a_command_and_refuses_another_shape() {
        assert_eq!(denied(Value::Nil).unwrap(), None);
        let json = Value::BulkString(br#"["DEL","k"]"#.to_vec());
        assert_eq!(denied(json).unwrap(), Some(vec!["DEL".into(), "k".into()]));
        assert!(denied(Value::Int(0)).is_err());
        assert!(denied(Value::BulkString(b"DEL".to_vec())).is_err());
    }
}
