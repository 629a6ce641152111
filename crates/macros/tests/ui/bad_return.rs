struct S;

#[toolgate_server::tools]
impl S {
    /// Returns a number, which is not a tool result.
    #[tool]
    async fn number(&self) -> u64 {
        1
    }
}

fn main() {}
