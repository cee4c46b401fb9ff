//! The `export_plugin!` macro.
//!
//! It writes by hand what abi_stable's `#[export_root_module]` attribute generates, because that
//! attribute expands to paths under `::abi_stable`, which a plugin crate that depends only on
//! this crate cannot name. A test below pins the exported symbol's name to abi_stable's.

/// Exports a plugin library's root module.
///
/// ```ignore
/// openclaw_plugin_api::export_plugin! {
///     name: "my-method",
///     description: "A clipped policy-gradient loss with a KL penalty",
///     default_config: include_str!("../config.toml"),
///     loss: MyLoss,
///     reward: MyReward,
/// }
/// ```
///
/// Each `kind: Type` pair names a kind (`loss`, `reward`, `rollout`, `generate`, `env`) and the
/// type that implements its trait. The manifest's version is the plugin crate's own version.
/// Every call into the library (the manifest, each constructor and each method) catches
/// panics and returns them as errors carrying the panic's message.
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        description: $desc:expr,
        default_config: $cfg:expr,
        $( $kind:ident : $ty:ty ),+ $(,)?
    ) => {
        #[doc(hidden)]
        pub extern "C" fn __openclaw_plugin_manifest() -> $crate::abi_stable::std_types::RResult<
            $crate::Manifest,
            $crate::abi_stable::std_types::RString,
        > {
            $crate::ffi::guard("manifest", || {
                ::std::result::Result::Ok::<_, ::std::string::String>($crate::Manifest {
                    name: ::std::convert::Into::into($name),
                    version: ::std::convert::Into::into(env!("CARGO_PKG_VERSION")),
                    kinds: ::std::vec![
                        $( $crate::abi_stable::std_types::RString::from(stringify!($kind)) ),+
                    ]
                    .into(),
                    description: ::std::convert::Into::into($desc),
                    default_config: ::std::convert::Into::into($cfg),
                })
            })
        }

        #[doc(hidden)]
        pub fn __openclaw_plugin_root() -> $crate::PluginModuleRef {
            #[allow(unused_mut)]
            let mut module = $crate::PluginModule {
                manifest: __openclaw_plugin_manifest,
                loss: ::std::option::Option::None,
                reward: ::std::option::Option::None,
                rollout: ::std::option::Option::None,
                generate: ::std::option::Option::None,
                env: ::std::option::Option::None,
                loss_inputs: ::std::option::Option::None,
            };
            $( $crate::__export_kind!(module, $kind, $ty); )+
            $crate::abi_stable::prefix_type::PrefixTypeTrait::leak_into_prefix(module)
        }

        /// The library header abi_stable looks up when it loads this library.
        #[doc(hidden)]
        #[unsafe(no_mangle)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi_stable::library::LibHeader = {
            extern "C" fn erased() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader(__openclaw_plugin_root)
            }
            // SAFETY: `erased` returns the root module of type `PluginModuleRef`, which is the
            // type the header is built for; this is what `#[export_root_module]` generates.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::PluginModuleRef>(
                    erased,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

/// Sets one constructor of a root module; used by [`export_plugin!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __export_kind {
    ($m:ident, loss, $ty:ty) => {
        $m.loss = ::std::option::Option::Some($crate::ffi::new_loss::<$ty>);
        $m.loss_inputs = ::std::option::Option::Some($crate::ffi::loss_inputs::<$ty>);
    };
    ($m:ident, reward, $ty:ty) => {
        $m.reward = ::std::option::Option::Some($crate::ffi::new_reward::<$ty>);
    };
    ($m:ident, rollout, $ty:ty) => {
        $m.rollout = ::std::option::Option::Some($crate::ffi::new_rollout::<$ty>);
    };
    ($m:ident, generate, $ty:ty) => {
        $m.generate = ::std::option::Option::Some($crate::ffi::new_generate::<$ty>);
    };
    ($m:ident, env, $ty:ty) => {
        $m.env = ::std::option::Option::Some($crate::ffi::new_env::<$ty>);
    };
    ($m:ident, $other:ident, $ty:ty) => {
        ::std::compile_error!(::std::concat!(
            "unknown plugin kind `",
            ::std::stringify!($other),
            "`: expected loss, reward, rollout, generate or env"
        ));
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exported_symbol_is_the_one_abi_stable_looks_up() {
        assert_eq!(
            abi_stable::library::ROOT_MODULE_LOADER_NAME,
            "_1as_0lib_1header_0root_bmodule_bloader"
        );
    }
}
