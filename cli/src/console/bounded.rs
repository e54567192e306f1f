//! Bounded JSON: every string the console sends (an answer or an event) is cut to
//! [`MAX_STRING`] characters, so a huge registry value costs the page nothing.

use serde_json::Value;

/// The longest string the console sends; longer ones are cut and end in `…`.
pub const MAX_STRING: usize = 1024;

/// Cuts every string (and object key) in `value` to [`MAX_STRING`] characters.
pub fn clip(value: &mut Value) {
    match value {
        Value::String(s) => cut(s),
        Value::Array(items) => items.iter_mut().for_each(clip),
        Value::Object(map) => {
            if map.keys().any(|k| k.chars().count() > MAX_STRING) {
                let entries = std::mem::take(map);
                for (mut key, value) in entries {
                    cut(&mut key);
                    map.insert(key, value);
                }
            }
            map.values_mut().for_each(clip);
        }
        _ => {}
    }
}

fn cut(s: &mut String) {
    if let Some((at, _)) = s.char_indices().nth(MAX_STRING) {
        s.truncate(at);
        s.push('…');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_and_keys_are_cut_short_ones_kept() {
        let long = "é".repeat(MAX_STRING * 3);
        let mut value = serde_json::json!({"a": [long.clone(), "short"], long.clone(): 1});
        clip(&mut value);
        let text = value.to_string();
        assert!(text.len() < 4 * MAX_STRING * 2 + 100, "{}", text.len());
        assert_eq!(value["a"][1], "short");
        assert!(value["a"][0].as_str().unwrap().ends_with('…'));
    }
}
