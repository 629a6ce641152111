struct S;

#[toolgate_server::tools]
impl S {
    /// Changes itself.
    #[tool]
    async fn change(&mut self) -> String {
        String::new()
    }
}

fn main() {}
