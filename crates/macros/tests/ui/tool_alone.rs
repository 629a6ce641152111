struct S;

impl S {
    /// Reads.
    #[toolgate_server::tool]
    async fn read(&self) -> String {
        String::new()
    }
}

fn main() {}
