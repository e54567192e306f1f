//! Names as Dubbo writes them to Nacos. Pure: no I/O.
//!
//! * A naming service is the app name with `$` written as `___`
//!   (`NacosNamingServiceWrapper.handleInnerSymbol`: Nacos refuses `$` in names).
//! * A config's `dataId` and `group` have `$` written as `___` and `/` as `-`
//!   (`NacosConfigServiceWrapper.handleInnerSymbol`, which both the mapping and the metadata
//!   report go through).
//! * Service names come back from the server as `group@@name` in places; the group is
//!   dropped (`NamingUtils.getServiceName`).

/// The config group of the interface → apps mapping (Dubbo's `DEFAULT_MAPPING_GROUP`).
pub const MAPPING_GROUP: &str = "mapping";
/// Nacos's default group, of instances and of dubbo-go's older metadata reports.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The cluster every instance is registered in (Nacos's default, as Dubbo leaves it).
pub const DEFAULT_CLUSTER: &str = "DEFAULT";
/// The separator Nacos puts between a group and a service name.
const GROUP_SEPARATOR: &str = "@@";

/// The naming service an app registers under.
pub fn service_name(app: &str) -> String {
    app.replace('$', "___")
}

/// The app a naming service name stands for: the group prefix (`group@@`) dropped and
/// `___` read back as `$`.
pub fn app_of_service(name: &str) -> String {
    let bare = name
        .rsplit_once(GROUP_SEPARATOR)
        .map_or(name, |(_, service)| service);
    bare.replace("___", "$")
}

/// A config `dataId` or `group` as Dubbo writes it.
pub fn config_key(value: &str) -> String {
    value.replace('$', "___").replace('/', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_dubbo_writes_them() {
        assert_eq!(service_name("shop$orders"), "shop___orders");
        assert_eq!(service_name("shop-orders"), "shop-orders");
        assert_eq!(
            app_of_service("DEFAULT_GROUP@@shop___orders"),
            "shop$orders"
        );
        assert_eq!(app_of_service("shop"), "shop");
        assert_eq!(app_of_service("a@@b@@shop"), "shop");
        assert_eq!(config_key("org.Outer$Inner"), "org.Outer___Inner");
        assert_eq!(config_key("dev/shop"), "dev-shop");
    }
}
