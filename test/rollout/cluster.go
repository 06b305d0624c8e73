package rollout

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// GatewayGVR is the Gateway resource, for the dynamic client.
var GatewayGVR = schema.GroupVersionResource{Group: "ferrofed.io", Version: "v1alpha1", Resource: "gateways"}

// OwnedDeployment is the Deployment in ns whose controller owner has the UID owner.
func OwnedDeployment(ctx context.Context, kube kubernetes.Interface, ns string, owner types.UID) (*appsv1.Deployment, error) {
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == owner {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Deployment owned by %s in %s yet", owner, ns)
}

// OwnedService is the Service in ns whose controller owner has the UID owner.
func OwnedService(ctx context.Context, kube kubernetes.Interface, ns string, owner types.UID) (*corev1.Service, error) {
	list, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == owner {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Service owned by %s in %s yet", owner, ns)
}

// EndpointAddrs are the ready endpoint addresses of a Service.
func EndpointAddrs(ctx context.Context, kube kubernetes.Interface, svc *corev1.Service) ([]string, error) {
	slices, err := kube.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc.Name})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out, nil
}

// OnThisMachine reports whether every address is on a network of one of this machine's
// interfaces: loads are sent only to such targets.
func OnThisMachine(addrs []string) (bool, string) {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return false, err.Error()
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		local := false
		for _, ia := range ifaces {
			if n, ok := ia.(*net.IPNet); ok && n.Contains(ip) && !n.IP.IsLoopback() {
				local = true
			}
		}
		if !local {
			return false, fmt.Sprintf("%s is on no network of this machine", a)
		}
	}
	return len(addrs) > 0, "no endpoint"
}

// NodeAddressOnThisMachine is a node InternalIP that is an address of this machine: the
// pods reach this process there (the local cluster's node IP is its bridge address).
func NodeAddressOnThisMachine(ctx context.Context, kube kubernetes.Interface) (string, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	local, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			for _, la := range local {
				if ipn, ok := la.(*net.IPNet); ok && ipn.IP.Equal(net.ParseIP(a.Address)) {
					return a.Address, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no node InternalIP is an address of this machine")
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Condition is a status condition of an object (a Gateway): its status, and its reason
// and message as one string.
func Condition(obj *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"], ": ", m["message"])
		}
	}
	return "Unknown", "not reported yet"
}

// Routed asks base's readiness on n fresh connections in a row and says whether every
// one was answered by a serving gateway, or what answered instead. The EndpointSlice
// lists a pod once it is ready, but kube-proxy writes its rules a moment later: until
// then a connection to the ClusterIP is refused (or, on a machine that lets it leave,
// answered by whatever the default route leads to), and a load started before that
// counts failures that are not the gateway's.
func Routed(ctx context.Context, base string, n int) (bool, string) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	return RoutedVia(ctx, client, base, n)
}

// RoutedVia is Routed through client, whose transport must not keep connections
// alive (each ask a fresh connection, so a fresh choice by kube-proxy): for a gateway
// that serves TLS, a client that trusts its certificate (and presents one, with
// mutual TLS).
func RoutedVia(ctx context.Context, client *http.Client, base string, n int) (bool, string) {
	for ok := 0; ok < n; ok++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health/readiness", nil)
		if err != nil {
			return false, err.Error()
		}
		res, err := client.Do(req)
		if err != nil {
			return false, fmt.Sprintf("%d in a row, then %v", ok, err)
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"phase":"serving"`) {
			return false, fmt.Sprintf("%d in a row, then %s %.80s", ok, res.Status, strings.Join(strings.Fields(string(body)), " "))
		}
	}
	return true, "routed"
}
