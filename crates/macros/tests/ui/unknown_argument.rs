struct S;

#[toolgate_server::tools]
impl S {
    /// Reads.
    #[tool(readonly)]
    async fn read(&self) -> String {
        String::new()
    }
}

fn main() {}
