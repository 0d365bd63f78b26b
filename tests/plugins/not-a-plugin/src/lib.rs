//! A valid component that is not a sanddune plugin: it exports an unrelated
//! interface. The host must say so instead of failing to link.

wit_bindgen::generate!({
    inline: r#"
        package example:greeter;
        interface greet {
            hello: func() -> string;
        }
        world greeter {
            export greet;
        }
    "#,
});

struct Greeter;

impl exports::example::greeter::greet::Guest for Greeter {
    fn hello() -> String {
        "hello".into()
    }
}

export!(Greeter);
