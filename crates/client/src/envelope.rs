//! The params of an outgoing request, with the request's own `_meta`.

use serde_json::{Map, Value};

/// Request params with the request's `_meta` in place of any the caller
/// put there, serialized without copying the params (they may be large,
/// and a retry needs them again).
pub(crate) struct WithMeta<'a> {
    pub(crate) params: &'a Map<String, Value>,
    pub(crate) meta: Option<&'a Map<String, Value>>,
}

impl serde::Serialize for WithMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in self.params {
            if self.meta.is_none() || k != "_meta" {
                map.serialize_entry(k, v)?;
            }
        }
        if let Some(meta) = self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::WithMeta;
    use serde_json::{Value, json};

    fn encoded(params: Value, meta: Option<Value>) -> Value {
        let params = params.as_object().cloned().unwrap_or_default();
        let meta = meta.and_then(|m| m.as_object().cloned());
        let with = WithMeta {
            params: &params,
            meta: meta.as_ref(),
        };
        serde_json::to_value(&with).unwrap_or(Value::Null)
    }

    #[test]
    fn the_requests_meta_replaces_the_callers() {
        let out = encoded(
            json!({"name": "t", "_meta": {"caller": 1}}),
            Some(json!({"v": 2})),
        );
        assert_eq!(out, json!({"name": "t", "_meta": {"v": 2}}));
    }

    #[test]
    fn without_a_meta_the_callers_stays() {
        let out = encoded(json!({"name": "t", "_meta": {"caller": 1}}), None);
        assert_eq!(out, json!({"name": "t", "_meta": {"caller": 1}}));
        assert_eq!(encoded(json!({}), None), json!({}));
    }
}
