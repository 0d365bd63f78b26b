//! An agent provider built against a future, incompatible sanddune API
//! version: the host must refuse it and name both versions.

wit_bindgen::generate!({
    inline: r#"
        package sanddune:plugin@0.9.0;
        interface agent-provider {
            describe: func() -> string;
        }
        world agent-plugin {
            export agent-provider;
        }
    "#,
});

struct Future;

impl exports::sanddune::plugin::agent_provider::Guest for Future {
    fn describe() -> String {
        "from the future".into()
    }
}

export!(Future);
