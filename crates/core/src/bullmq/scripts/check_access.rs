//! The commands a Redis user may not run (`lua/check_access.lua`).

use super::Scripts;
use redis::RedisResult;
use redis::aio::ConnectionLike;

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
        let denied: Option<String> = call.invoke_async(con).await?;
        Ok(denied.and_then(|json| serde_json::from_str(&json).ok()))
    }
}
