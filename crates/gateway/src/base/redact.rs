//! Store addresses as messages may show them (layer `base`): what the
//! configuration's `Debug`, the stores' errors and the console print.

/// `url` (PostgreSQL or Redis) with its password and query values masked;
/// a key-value connection string, which may hold a password anywhere, is
/// not shown at all.
pub fn store_url(url: &str) -> String {
    if url.contains("://") {
        toolgate_protocol::redact::url(url)
    } else {
        "(a PostgreSQL connection string)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::store_url as redact;

    #[test]
    fn messages_never_show_the_password() {
        assert_eq!(
            redact("postgres://gw:s3cret@db.example.com:5432/audit"),
            "postgres://gw:***@db.example.com:5432/audit"
        );
        assert_eq!(
            redact("postgres://db/audit?password=s3cret"),
            "postgres://db/audit?password=***"
        );
        assert_eq!(redact("postgres://db/audit"), "postgres://db/audit");
        assert!(!redact("host=db password=s3cret").contains("s3cret"));
    }
}
