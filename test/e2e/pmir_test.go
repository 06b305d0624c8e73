//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ferrofed/ferrofed/test/rollout"
)

const (
	pmirGatewayName = "e2e-pmir"
	pmirName        = "pmir-registry"
	// pmirBindingsDrain is the Gateway's bindingsDrainTimeout: the registry's DELETE
	// (timeout_ms 10 s) outlasts it.
	pmirBindingsDrain = time.Second
)

// pmirAbandoned: a Gateway with [pmir] holds a subscription at the PMIR registry double
// (test/doubles/identityregistry/cmd/pmir) running as a pod; with the registry's DELETE set to hang, the
// gateway pod is deleted: drain step 4's DELETE outlasts bindingsDrainTimeout and is
// abandoned, the termination message lists identity_registry, and the Gateway's
// status.drains carries it for that pod, the drain completed within its grace period.
func (s *e2e) pmirAbandoned(t *testing.T) {
	ctx := context.Background()
	if len(s.members) == 0 {
		t.Fatal("no member pods: the step that deploys them did not run")
	}
	reg := s.deployPMIR(t)
	s.needIssuer(t)

	endpoint := "http://" + pmirGatewayName + "." + cfg.namespace + ".svc/pmir/$process-message"
	member := s.members[0]
	inline := fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n\n%s\n[pmir]\nurl = %q\nendpoint = %q\nfeed_scope = \"pmir.feed\"\ntimeout_ms = 10000\n",
		member.ID, member.URL, s.issuer.TOMLIssuer(), reg.fhir, endpoint)
	gw := s.quickGateway(t, pmirGatewayName, inline, pmirBindingsDrain)
	// identity_registry up: the gateway's subscription is held at the registry.
	var sub pmirSubscription
	eventually(t, time.Minute, "the gateway's subscription at the registry", func(context.Context) (bool, string, error) {
		st, err := reg.state()
		if err != nil {
			return false, err.Error(), nil //nolint:nilerr // not reachable yet is what this poll waits out
		}
		for _, x := range st.Subscriptions {
			if x.Endpoint == endpoint && (x.Status == "requested" || x.Status == "active") {
				sub = x
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("subscriptions %+v", st.Subscriptions), nil
	})
	s.waitIdentityRegistryUp(t, gw)
	dep, err := s.c.ownedDeployment(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	victim := s.onlyPod(t, metav1.FormatLabelSelector(dep.Spec.Selector))
	grace := ptr.Deref(victim.Spec.TerminationGracePeriodSeconds, 0)
	before, err := reg.state()
	if err != nil {
		t.Fatal(err)
	}
	reg.control(t, "delete-hang?on=true")
	if err := s.c.kube.CoreV1().Pods(cfg.namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", victim.Name, err)
	}
	t.Logf("deleted pod %s (grace period %d s) holding subscription %s, the registry's DELETE hanging", victim.Name, grace, sub.ID)
	var rec map[string]any
	eventually(t, time.Minute+time.Duration(grace)*time.Second, "the pod's drain in status.drains", func(ctx context.Context) (bool, string, error) {
		gw, err := s.c.getGateway(ctx, cfg.namespace, pmirGatewayName)
		if err != nil {
			return false, "", err
		}
		rec = drainRecord(gw, victim.Name)
		return rec != nil, "pod " + victim.Name + " not in status.drains yet", nil
	})
	d := drainsOf(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"drains": []any{rec}}}})[victim.Name]
	abandoned, _, _ := unstructured.NestedStringSlice(rec, "abandonedBindings")
	if !contains(abandoned, "identity_registry") {
		t.Errorf("pod %s: status.drains abandonedBindings %v, want identity_registry (record %v)", victim.Name, abandoned, rec)
	}
	// An abandoned binding does not cut the drain: it completed, on its own, within
	// the grace period (not killed).
	if d.outcome != "completed" || d.exitCode != 0 || d.grace != grace || d.durationMS <= 0 || d.durationMS >= grace*1000 {
		t.Errorf("pod %s: status.drains %+v, want outcome completed, exit code 0, grace period %d s, a duration under it", victim.Name, d, grace)
	}
	after, err := reg.state()
	if err != nil {
		t.Fatal(err)
	}
	if after.Deletes <= before.Deletes {
		t.Errorf("the registry saw %d DELETEs before the pod's deletion and %d after: drain step 4 sent none", before.Deletes, after.Deletes)
	}
	s.summary = append(s.summary, fmt.Sprintf("e2e pmir abandoned: pod %s deleted (grace %ds) with the registry's DELETE hanging: status.drains outcome=%s exit=%d after %dms, abandonedBindings=%v; DELETEs at the registry %d",
		victim.Name, grace, d.outcome, d.exitCode, d.durationMS, abandoned, after.Deletes-before.Deletes))
}

// waitIdentityRegistryUp asks the gateway's dependency report, through its Service
// with an operator token, until identity_registry is up: the subscription is held.
func (s *e2e) waitIdentityRegistryUp(t *testing.T, gw *unstructured.Unstructured) {
	t.Helper()
	svc, err := s.c.ownedService(context.Background(), gw)
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) == 0 {
		t.Fatalf("the PMIR Gateway's Service %s has no port", svc.Name)
	}
	report := fmt.Sprintf("http://%s:%d/operator/dependencies", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, time.Minute, "identity_registry up in the gateway's dependency report", func(context.Context) (bool, string, error) {
		req, _ := http.NewRequest(http.MethodGet, report, nil)
		req.Header.Set("Authorization", "Bearer "+s.issuer.Token(s.issuer.Scope, time.Hour))
		res, err := client.Do(req)
		if err != nil {
			// Not reachable yet (kube-proxy catching up) is what this poll waits out.
			return false, err.Error(), nil //nolint:nilerr // see above
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("%s %v", res.Status, err), nil
		}
		return body["identity_registry"] == "up", fmt.Sprintf("identity_registry=%v identity_registry_fault=%v", body["identity_registry"], body["identity_registry_fault"]), nil
	})
}

// drainRecord is the status.drains record of pod, or nil.
func drainRecord(gw *unstructured.Unstructured, pod string) map[string]any {
	list, _, _ := unstructured.NestedSlice(gw.Object, "status", "drains")
	for _, item := range list {
		if m, ok := item.(map[string]any); ok && m["pod"] == pod {
			return m
		}
	}
	return nil
}

type pmirRegistry struct {
	fhir       string // the registry's FHIR base through its Service
	controlURL string // the control API's root through its Service
	client     *http.Client
}

type pmirSubscription struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Endpoint string `json:"endpoint"`
}

type pmirState struct {
	Subscriptions []pmirSubscription `json:"subscriptions"`
	Creates       int                `json:"creates"`
	Deletes       int                `json:"deletes"`
}

// deployPMIR runs the registry double as a Service and a Deployment (the registry on
// port 8080, its control API on 8081), and waits until this process reaches it
// through the Service.
func (s *e2e) deployPMIR(t *testing.T) *pmirRegistry {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/name": pmirName}
	// The Service first: the registry names itself by its ClusterIP in the Location
	// of a created subscription, which must be on the origin the gateway asks.
	svc, err := s.c.kube.CoreV1().Services(cfg.namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: pmirName, Namespace: cfg.namespace, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "fhir", Port: 8080, TargetPort: intstr.FromString("fhir")},
			{Name: "control", Port: 8081, TargetPort: intstr.FromString("control")},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the PMIR registry double's Service: %v", err)
	}
	r := &pmirRegistry{
		fhir:       fmt.Sprintf("http://%s:8080/fhir", svc.Spec.ClusterIP),
		controlURL: fmt.Sprintf("http://%s:8081", svc.Spec.ClusterIP),
		client:     &http.Client{Timeout: 10 * time.Second},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: pmirName, Namespace: cfg.namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Containers: []corev1.Container{{
						Name: "registry", Image: cfg.pmirImage, ImagePullPolicy: corev1.PullNever,
						Args:  []string{"-listen", "0.0.0.0:8080", "-control", "0.0.0.0:8081", "-base", r.fhir},
						Ports: []corev1.ContainerPort{{Name: "fhir", ContainerPort: 8080}, {Name: "control", ContainerPort: 8081}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/_double/state", Port: intstr.FromInt32(8081)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	if _, err := s.c.kube.AppsV1().Deployments(cfg.namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the PMIR registry double: %v", err)
	}
	eventually(t, cfg.stepTimeout, "the PMIR registry double answers through its Service", func(ctx context.Context) (bool, string, error) {
		d, err := s.c.kube.AppsV1().Deployments(cfg.namespace).Get(ctx, pmirName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if ok, detail := rollout.RolledOut(d); !ok {
			return false, detail, nil
		}
		if _, err := r.state(); err != nil {
			// Not reachable yet (kube-proxy catching up) is what this poll waits out.
			return false, err.Error(), nil //nolint:nilerr // see above
		}
		return true, "", nil
	})
	return r
}

func (r *pmirRegistry) state() (pmirState, error) {
	var out pmirState
	res, err := r.client.Get(r.controlURL + "/_double/state")
	if err != nil {
		return out, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return out, fmt.Errorf("PMIR registry double state: %s", res.Status)
	}
	return out, json.NewDecoder(res.Body).Decode(&out)
}

// control posts to the double's control API.
func (r *pmirRegistry) control(t *testing.T, what string) {
	t.Helper()
	res, err := r.client.Post(r.controlURL+"/_double/"+what, "", nil)
	if err != nil {
		t.Fatalf("PMIR registry double %s: %v", what, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("PMIR registry double %s: %s", what, res.Status)
	}
}
