package introspect.interop;

import java.util.List;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.registry.client.DefaultServiceInstance;
import org.apache.dubbo.registry.client.ServiceDiscovery;
import org.apache.dubbo.registry.client.ServiceInstance;
import org.apache.dubbo.registry.client.event.ServiceInstancesChangedEvent;
import org.apache.dubbo.registry.client.event.listener.ServiceInstancesChangedListener;
import org.apache.dubbo.registry.etcd.EtcdServiceDiscovery;
import org.apache.dubbo.registry.etcd.EtcdServiceDiscoveryFactory;
import org.apache.dubbo.rpc.model.ApplicationModel;

/**
 * The one change the released etcd extension (dubbo-registry-etcd3 3.2.0) needs on Dubbo
 * 3.3's consumer side: it decodes instance records with Gson and never gives them their
 * application model, so Dubbo's consumer fails on every instance it reads
 * ({@code NullPointerException} in {@code MetadataUtils.buildMetadataUrl}) and never
 * fetches metadata. This factory replaces the extension's own under the same name
 * ({@code etcd}, in META-INF/dubbo/) and hands every instance read the application model,
 * as Dubbo's ZooKeeper and Nacos discoveries do. Nothing else changes: same keys, same
 * records, same watch.
 */
public final class EtcdDiscoveryFix extends EtcdServiceDiscoveryFactory {
    @Override
    protected ServiceDiscovery createDiscovery(URL registryURL) {
        return new Discovery(applicationModel, registryURL);
    }

    static final class Discovery extends EtcdServiceDiscovery {
        Discovery(ApplicationModel applicationModel, URL registryURL) {
            super(applicationModel, registryURL);
        }

        private void adopt(List<ServiceInstance> instances) {
            for (ServiceInstance instance : instances) {
                if (instance instanceof DefaultServiceInstance && instance.getApplicationModel() == null) {
                    ((DefaultServiceInstance) instance).setApplicationModel(applicationModel);
                }
            }
        }

        @Override
        public List<ServiceInstance> getInstances(String serviceName) {
            List<ServiceInstance> instances = super.getInstances(serviceName);
            adopt(instances);
            return instances;
        }

        @Override
        protected void registerServiceWatcher(String serviceName, ServiceInstancesChangedListener listener) {
            ServiceDiscovery self = this;
            ServiceInstancesChangedListener adopting =
                    new ServiceInstancesChangedListener(listener.getServiceNames(), self) {
                        @Override
                        public void onEvent(ServiceInstancesChangedEvent event) {
                            adopt(event.getServiceInstances());
                            listener.onEvent(event);
                        }
                    };
            for (int attempt = 1; ; attempt++) {
                try {
                    super.registerServiceWatcher(serviceName, adopting);
                    return;
                } catch (IllegalStateException e) {
                    System.err.println("watch attempt " + attempt + " failed: " + e.getMessage());
                    if (attempt == 10) {
                        throw e;
                    }
                    try {
                        Thread.sleep(200);
                    } catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                        throw e;
                    }
                }
            }
        }
    }
}
