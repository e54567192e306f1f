//! Reading a rule file: refused over the rule bound before anything parses it, and when it
//! is not UTF-8; errors name the file.

use std::io::Read as _;
use std::path::Path;

use introspect::Error;
use introspect::governance::MAX_RULE_BYTES;

/// The text of the rule file at `path`.
pub fn read(path: &Path) -> Result<String, Error> {
    let refuse = |reason: String| Error::Rule {
        key: path.display().to_string(),
        reason,
        source: None,
    };
    let file =
        std::fs::File::open(path).map_err(|e| refuse(format!("cannot read: {e}")).caused_by(e))?;
    let mut bytes = Vec::new();
    // One byte over the bound is enough to know the file is too large.
    file.take(MAX_RULE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read: {e}")).caused_by(e))?;
    if bytes.len() > MAX_RULE_BYTES {
        return Err(refuse(format!(
            "over the limit of {MAX_RULE_BYTES} bytes for a rule"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|e| refuse(format!("not UTF-8 text ({})", e.utf8_error())).caused_by(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_absent_and_binary_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, vec![b'a'; MAX_RULE_BYTES + 1]).unwrap();
        let err = read(&big).unwrap_err().to_string();
        assert!(
            err.contains("big.yaml") && err.contains("over the limit"),
            "{err}"
        );
        let binary = dir.path().join("bin.yaml");
        std::fs::write(&binary, [b'a', 0xff]).unwrap();
        assert!(read(&binary).unwrap_err().to_string().contains("not UTF-8"));
        let absent = dir.path().join("absent.yaml");
        assert!(
            read(&absent)
                .unwrap_err()
                .to_string()
                .contains("absent.yaml")
        );
        let fine = dir.path().join("fine.yaml");
        std::fs::write(&fine, "tags: []").unwrap();
        assert_eq!(read(&fine).unwrap(), "tags: []");
    }
}
