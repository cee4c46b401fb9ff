//! The modules `openclaw-host plugins new` writes into a new plugin, one per kind, kept as
//! files of a plugin that builds, so that what the scaffold writes is compiled and checked
//! against the contract with the rest of the workspace (the scaffold includes these files).

pub mod env;
pub mod generate;
pub mod loss;
pub mod reward;
pub mod rollout;

openclaw_plugin_api::export_plugin! {
    name: "plugin-templates",
    description: "The modules plugins new writes, one per kind",
    default_config: concat!(
        include_str!("../config/loss.toml"),
        include_str!("../config/reward.toml"),
        include_str!("../config/rollout.toml"),
        include_str!("../config/generate.toml"),
        include_str!("../config/env.toml"),
    ),
    loss: loss::MyLoss,
    reward: reward::MyReward,
    rollout: rollout::MyRollout,
    generate: generate::MyGenerate,
    env: env::MyEnv,
}

#[cfg(test)]
mod tests {
    use openclaw_plugin_api::{HostServices, Loss};

    #[test]
    fn the_manifest_agrees_with_plugin_toml() {
        let m = super::__openclaw_plugin_manifest().unwrap();
        let kinds = openclaw_plugin_api::testing::assert_manifest_matches(
            &m,
            include_str!("../plugin.toml"),
            env!("CARGO_PKG_VERSION"),
        );
        assert_eq!(kinds, ["loss", "reward", "rollout", "generate", "env"]);
    }

    #[test]
    fn every_kind_reads_its_table_of_the_default_configuration() {
        let config = super::__openclaw_plugin_manifest()
            .unwrap()
            .default_config
            .to_string();
        super::loss::MyLoss::new(&config, HostServices::standalone()).unwrap();
    }
}
