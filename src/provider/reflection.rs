//! gRPC server reflection describing MetadataService, in both protocol versions (`v1`, and
//! `v1alpha`, which Python's `grpcio-reflection` and other older tools speak), so generic
//! tools list and call it without the proto file. The only place reflection is built; without
//! the `reflection` feature nothing is added.

use tonic::transport::server::Router;

use crate::error::Result;

/// Without the `reflection` feature: the router as it is.
#[cfg(not(feature = "reflection"))]
pub(super) fn add_reflection<L>(router: Router<L>) -> Result<Router<L>> {
    Ok(router)
}

/// Adds reflection `v1` and `v1alpha` describing MetadataServiceV2 to `router`.
#[cfg(feature = "reflection")]
pub(super) fn add_reflection<L>(router: Router<L>) -> Result<Router<L>> {
    use super::routes::add_once;
    use crate::error::Error;
    use crate::rpc::pb::FILE_DESCRIPTOR_SET;

    let configure = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
    };
    let failed =
        |e: tonic_reflection::server::Error| Error::server(format!("reflection: {e}")).caused_by(e);
    let v1 = configure().build_v1().map_err(failed)?;
    let v1alpha = configure().build_v1alpha().map_err(failed)?;
    let router = add_once(router, "gRPC reflection v1", move |r| r.add_service(v1))?;
    add_once(router, "gRPC reflection v1alpha", move |r| {
        r.add_service(v1alpha)
    })
}
