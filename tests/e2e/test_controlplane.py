"""The real control plane itself: it serves, enforces RBAC, holds bare nodes, and the real
kube-scheduler of the same release schedules on them (the side-by-side machinery)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes_asyncio import client, config

from tests.controlplane import ApiError, ControlPlane, wait_for
from tests.controlplane.rest import JSON


def test_apiserver_serves(controlplane: ControlPlane) -> None:
    version = controlplane.api.get("/version")
    assert version["gitVersion"].startswith("v1.")
    assert controlplane.api.get("/readyz") == "ok"
    assert controlplane.server.startswith("https://127.0.0.1:")
    names = {ns["metadata"]["name"] for ns in controlplane.api.list("v1", "Namespace")}
    assert {"default", "kube-system"} <= names


def test_rbac_is_enforced(controlplane: ControlPlane, namespace: str) -> None:
    nobody = controlplane.client("nobody")
    with pytest.raises(ApiError) as denied:
        nobody.list("v1", "Pod", namespace)
    assert denied.value.status == 403
    assert "cannot list resource" in str(denied.value)
    # the admin (system:masters) can
    assert controlplane.api.list("v1", "Pod", namespace) == []


def test_service_account_tokens_are_minted_and_authorized(
    controlplane: ControlPlane, namespace: str
) -> None:
    sa = controlplane.client_with_token(controlplane.service_account_token(namespace, "reader"))
    try:
        with pytest.raises(ApiError) as denied:
            sa.list("v1", "Pod", namespace)
        assert denied.value.status == 403
        assert f"system:serviceaccount:{namespace}:reader" in str(denied.value)
        # (not the `view` ClusterRole: aggregated roles stay empty without the
        # kube-controller-manager's aggregation controller)
        rbac = "rbac.authorization.k8s.io/v1"
        controlplane.api.create(
            {
                "apiVersion": rbac,
                "kind": "Role",
                "metadata": {"name": "pod-reader", "namespace": namespace},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
            }
        )
        controlplane.api.create(
            {
                "apiVersion": rbac,
                "kind": "RoleBinding",
                "metadata": {"name": "reader-pods", "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "pod-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
            }
        )

        def allowed() -> bool:  # the RBAC authorizer sees the binding through its informer
            try:
                return sa.list("v1", "Pod", namespace) == []
            except ApiError as err:
                if err.status != 403:
                    raise
                return False

        wait_for(allowed, timeout=10, what="the RoleBinding to take effect")
    finally:
        sa.close()


async def test_kubeconfig_works_with_kubernetes_asyncio(controlplane: ControlPlane) -> None:
    # the generated CA verifies the serving certificate for 127.0.0.1 (no insecure skip)
    api_client = await config.new_client_from_config(config_file=str(controlplane.kubeconfig))
    async with api_client:
        namespaces = await client.CoreV1Api(api_client).list_namespace()
    assert "default" in {ns.metadata.name for ns in namespaces.items}


def test_control_planes_run_side_by_side(
    controlplane: ControlPlane, controlplane_factory: Callable[..., ControlPlane]
) -> None:
    with ThreadPoolExecutor(2) as pool:
        others = list(pool.map(lambda _: controlplane_factory(), range(2)))
    servers = {cp.server for cp in [controlplane, *others]}
    assert len(servers) == 3
    others[0].create_nodes(1, prefix="only-here-")
    assert [n["metadata"]["name"] for n in others[0].api.list("v1", "Node")] == ["only-here-0"]
    assert others[1].api.list("v1", "Node") == []


def test_real_kube_scheduler_binds_pods_on_bare_nodes(
    controlplane_factory: Callable[..., ControlPlane],
) -> None:
    cp = controlplane_factory()
    names = cp.create_nodes(3, cpu="2", memory="4Gi", pods="10", zones=3)
    assert names == ["node-0", "node-1", "node-2"]
    nodes = {n["metadata"]["name"]: n for n in cp.api.list("v1", "Node")}
    assert set(nodes) == set(names)
    for node in nodes.values():
        assert node["status"]["allocatable"]["cpu"] == "2"
        assert node["status"]["allocatable"]["memory"] == "4Gi"
        assert node["status"]["allocatable"]["pods"] == "10"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"].startswith("zone-")
        assert not node["spec"].get("taints")  # TaintNodesByCondition is off

    scheduler = cp.start_kube_scheduler()
    assert scheduler.config["clientConnection"]["qps"] == 5000
    cp.create_pod("fits", cpu="1500m")
    bound = cp.wait_bound("fits")
    assert bound in names
    # a second pod asking as much cannot share that node
    cp.create_pod("fits-elsewhere", cpu="1500m")
    assert cp.wait_bound("fits-elsewhere") not in {bound}
    # a pod for another scheduler is left alone
    cp.create_pod("not-ours", scheduler_name="kubesched")

    def scheduled_event() -> bool:
        events = cp.api.list("v1", "Event", "default", fieldSelector="involvedObject.name=fits")
        return any(e["reason"] == "Scheduled" for e in events)

    wait_for(scheduled_event, timeout=30, what="the Scheduled event")
    assert "scheduler_schedule_attempts_total" in scheduler.metrics()
    assert "nodeName" not in cp.api.read("v1", "Pod", "not-ours", "default")["spec"]
    scheduler.stop()
    assert not scheduler.running()


def test_kubectl_applies_and_gets_as_an_identity(
    controlplane: ControlPlane, namespace: str
) -> None:
    config_map = (
        "apiVersion: v1\nkind: ConfigMap\n"
        f"metadata: {{name: applied, namespace: {namespace}}}\ndata: {{k: v}}\n"
    )
    applied = controlplane.kubectl("apply", "-f", "-", input=config_map)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "configmap/applied created"
    got = controlplane.kubectl("get", "configmap", "applied", "-n", namespace, "-o", "name")
    assert got.stdout.strip() == "configmap/applied"
    denied = controlplane.kubectl("get", "pods", "-n", namespace, identity="nobody")
    assert denied.returncode != 0
    assert 'User "nobody" cannot list resource "pods"' in denied.stderr


def test_beta_apis_need_their_feature_gate_and_runtime_config(
    controlplane: ControlPlane, controlplane_factory: Callable[..., ControlPlane]
) -> None:
    # Kubernetes 1.37 ships the Workload API as beta, off by default: a stock control plane
    # does not serve it ...
    with pytest.raises((ApiError, KeyError)):
        controlplane.api.list("scheduling.k8s.io/v1beta1", "Workload", "default")
    # ... one started with the gate and the API version does, and so does its kube-scheduler
    gated = controlplane_factory(
        feature_gates={"GenericWorkload": True},
        runtime_config={"scheduling.k8s.io/v1beta1": True},
    )
    workload = gated.api.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {
                "podGroupTemplates": [
                    {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
                ]
            },
        }
    )
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] == 2
    scheduler = gated.start_kube_scheduler()
    assert "--feature-gates=GenericWorkload=true" in scheduler.argv


def test_controller_manager_runs_the_named_controllers(
    controlplane_factory: Callable[..., ControlPlane],
) -> None:
    # the resourceclaim controller turns a pod's ResourceClaimTemplate into a claim of its own
    cp = controlplane_factory()
    manager = cp.start_controller_manager(["resourceclaim-controller"])
    cp.api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
        }
    )
    cp.api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                        ]
                    }
                }
            },
        }
    )
    pod = cp.api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "default"},
            "spec": {
                "schedulerName": "nobody-schedules-this",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            },
        }
    )

    def claim() -> JSON | None:
        for item in cp.api.list("resource.k8s.io/v1", "ResourceClaim", "default"):
            owners = item["metadata"].get("ownerReferences") or []
            if any(o["uid"] == pod["metadata"]["uid"] for o in owners):
                return item
        manager.check_running()
        return None

    made = wait_for(claim, timeout=60, what="the claim made from the template")
    assert made["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"
    # the controller records the claim's name in the pod's status right after creating it
    statuses = wait_for(
        lambda: cp.api.read("v1", "Pod", "trainer", "default")["status"].get(
            "resourceClaimStatuses"
        ),
        timeout=30,
        what="the pod's resourceClaimStatuses",
    )
    assert statuses == [{"name": "gpu", "resourceClaimName": made["metadata"]["name"]}]
    with pytest.raises(ValueError, match="name the controllers"):
        cp.start_controller_manager([])
