//! A BullMQ job's hash fields, where bullsweep builds them itself.

/// The fields of a new waiting job that runs an archived job again: its `name`, `data` and
/// `opts` (without `jobId`, so the counter gives it a new id), created now, with no delay and
/// no priority, as `Queue.add` writes them.
pub fn new_job_fields(archived: &[(String, String)], now_ms: i64) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = archived
        .iter()
        .filter(|(k, _)| matches!(k.as_str(), "name" | "data" | "opts"))
        .cloned()
        .collect();
    for (k, v) in fields.iter_mut() {
        if k == "opts"
            && let Ok(serde_json::Value::Object(mut opts)) = serde_json::from_str(v)
        {
            opts.remove("jobId");
            *v = serde_json::Value::Object(opts).to_string();
        }
    }
    fields.push(("timestamp".into(), now_ms.to_string()));
    fields.push(("delay".into(), "0".into()));
    fields.push(("priority".into(), "0".into()));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_job_keeps_name_data_and_opts_without_its_id() {
        let archived = vec![
            ("name".to_string(), "mail".to_string()),
            ("data".to_string(), r#"{"to":"x"}"#.to_string()),
            (
                "opts".to_string(),
                r#"{"jobId":"j1","attempts":3}"#.to_string(),
            ),
            ("finishedOn".to_string(), "5".to_string()),
            ("returnvalue".to_string(), "1".to_string()),
        ];
        let fields = new_job_fields(&archived, 42);
        assert_eq!(
            fields,
            vec![
                ("name".to_string(), "mail".to_string()),
                ("data".to_string(), r#"{"to":"x"}"#.to_string()),
                ("opts".to_string(), r#"{"attempts":3}"#.to_string()),
                ("timestamp".to_string(), "42".to_string()),
                ("delay".to_string(), "0".to_string()),
                ("priority".to_string(), "0".to_string()),
            ]
        );
    }
}
