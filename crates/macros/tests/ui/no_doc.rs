struct S;

#[toolgate_server::tools]
impl S {
    #[tool(read_only)]
    async fn undocumented(&self) -> String {
        String::new()
    }
}

fn main() {}
