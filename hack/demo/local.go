package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/test/rollout"
)

// localDemo is `demo local`: the part of `make demo` on the real node that runs once the
// chart is installed (hack/demo.sh builds, starts the cluster and installs the chart).
type localDemo struct {
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	kubectl string
	kcfg    string
	ns      string
	image   string
	member  string
	rps     int
	state   string
	t0      time.Time // when `make demo` started, for the time to the first answer
	tty     bool
	out     sync.Mutex // one writer at a time: the live line and the event lines
	issuer  *rollout.Issuer
	members []*rollout.Member
}

// demoGateway is one of the two Gateways the demo runs: the sample, and the sample with
// drainDelay 0s.
type demoGateway struct {
	name       string
	drainDelay string // as in the spec; "" when the sample sets none
	obj        *unstructured.Unstructured
	deployment *appsv1.Deployment
	baseURL    string // http://<ClusterIP>:<port><basePath without its trailing />
	grace      int64
}

func local(args []string) error {
	fs := flag.NewFlagSet("local", flag.ExitOnError)
	d := &localDemo{}
	fs.StringVar(&d.kcfg, "kubeconfig", "/var/lib/ferrofed-cluster/kubeconfig", "the cluster's kubeconfig")
	fs.StringVar(&d.kubectl, "kubectl", "bin/cluster/kubectl", "the kubectl to show `kubectl get fgw` and run `kubectl rollout restart` with")
	fs.StringVar(&d.ns, "namespace", "demo", "where the members and the Gateways run (made afresh)")
	fs.StringVar(&d.image, "image", "ferrofed.local/ferrofed:e2e", "the ferrofed image (imported, never pulled)")
	fs.StringVar(&d.member, "member-image", "ferrofed.local/fhir-member:e2e", "the FHIR member test server image")
	fs.IntVar(&d.rps, "rps", 150, "requests a second of the load during each rollout (1 to 1000)")
	fs.StringVar(&d.state, "state", ".demo", "where the tokens are written (token: the operator's; client-token: the data plane's client's)")
	sample := fs.String("sample", "config/samples/ferrofed_v1alpha1_gateway.yaml", "the Gateway to run")
	exitAfter := fs.Int("exit-after", -1, "stop this many seconds after the rollouts (-1: at SIGINT or SIGTERM)")
	t0 := fs.Float64("t0", 0, "when `make demo` started, in Unix seconds (0: now)")
	_ = fs.Parse(args)
	if d.rps < 1 || d.rps > 1000 {
		return fmt.Errorf("-rps %d: want 1 to 1000", d.rps)
	}
	d.t0 = time.Now()
	if *t0 > 0 {
		d.t0 = time.Unix(0, int64(*t0*1e9))
	}
	if st, err := os.Stdout.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		d.tty = true
	}
	rc, err := clientcmd.BuildConfigFromFlags("", d.kcfg)
	if err != nil {
		return fmt.Errorf("load the kubeconfig %s: %w", d.kcfg, err)
	}
	rc.QPS, rc.Burst = 50, 100
	// The webhook's warnings (drainDelay 0s is shorter than the readiness poll) are
	// part of what the demo shows.
	rc.WarningHandler = warningPrinter{}
	if d.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if d.dyn, err = dynamic.NewForConfig(rc); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = d.run(ctx, *sample, *exitAfter)
	if d.issuer != nil {
		d.issuer.Close()
	}
	if ctx.Err() != nil && err != nil {
		return fmt.Errorf("interrupted (%w)", err)
	}
	return err
}

func (d *localDemo) run(ctx context.Context, samplePath string, exitAfter int) error {
	if err := d.freshNamespace(ctx); err != nil {
		return err
	}
	if err := d.startMembers(ctx); err != nil {
		return err
	}
	host, err := rollout.NodeAddressOnThisMachine(ctx, d.kube)
	if err != nil {
		return fmt.Errorf("the token issuer needs an address the pods reach: %w", err)
	}
	if d.issuer, err = rollout.StartIssuer(host); err != nil {
		return err
	}
	gws, err := d.applyGateways(ctx, samplePath)
	if err != nil {
		return err
	}
	if err := d.waitReady(ctx, gws); err != nil {
		return err
	}
	if err := d.showDerived(ctx, gws); err != nil {
		return err
	}
	if err := d.waitRouted(ctx, gws); err != nil {
		return err
	}
	d.tryRoutes(ctx, gws[0])

	step("A rolling restart under load, twice: the sample's drainDelay, then drainDelay 0s")
	info("each: a steady load of %d requests/s through the Service (half on fresh connections), one `kubectl rollout restart`,", d.rps)
	info("and, as the kubelet stops each old pod, its drain steps (from its log, then its termination message)")
	var lines []string
	for _, gw := range gws {
		line, err := d.restartUnderLoad(ctx, gw)
		if err != nil {
			return err
		}
		lines = append(lines, line)
	}
	step("Summary")
	for _, l := range lines {
		fmt.Println(l)
	}
	info("")
	info("what the drain delay buys: after SIGTERM the pod keeps serving while its readiness answers 503 and the")
	info("EndpointSlice and kube-proxy stop sending it new connections; with drainDelay 0s the listener closes at")
	info("SIGTERM while the Service still routes fresh connections to it, and those are refused")

	if exitAfter >= 0 {
		step(fmt.Sprintf("Running for %d s more (DEMO_EXIT_AFTER), then stopping", exitAfter))
	} else {
		step("Running. Press Ctrl-C to stop: everything the demo started is torn down")
	}
	info("export KUBECONFIG=%s; %s get fgw,pods -n %s", d.kcfg, d.kubectl, d.ns)
	var wait <-chan time.Time
	if exitAfter >= 0 {
		wait = time.After(time.Duration(exitAfter) * time.Second)
	}
	select {
	case <-ctx.Done():
	case <-wait:
	}
	return nil
}

// ---------------------------------------------------------------------------- setup

func (d *localDemo) freshNamespace(ctx context.Context) error {
	step("Namespace " + d.ns + " (made afresh; the members and both Gateways run there)")
	if err := d.kube.CoreV1().Namespaces().Delete(ctx, d.ns, metav1.DeleteOptions{}); err == nil {
		info("deleting namespace %s left from an earlier run", d.ns)
	}
	err := d.poll(ctx, 3*time.Minute, "namespace "+d.ns+" gone", func(ctx context.Context) (bool, string) {
		_, err := d.kube.CoreV1().Namespaces().Get(ctx, d.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "terminating"
	})
	if err != nil {
		return err
	}
	_, err = d.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.ns}}, metav1.CreateOptions{})
	return err
}

func (d *localDemo) startMembers(ctx context.Context) error {
	step(fmt.Sprintf("Starting two member nodes as pods (test/doubles/members/fhirmember, image %s)", d.member))
	d.members = []*rollout.Member{{ID: "node-a"}, {ID: "node-b"}}
	for _, m := range d.members {
		if err := rollout.DeployMember(ctx, d.kube, d.ns, d.member, m); err != nil {
			return err
		}
	}
	for _, m := range d.members {
		err := d.poll(ctx, 3*time.Minute, "member "+m.ID+" Ready", func(ctx context.Context) (bool, string) {
			dep, err := d.kube.AppsV1().Deployments(d.ns).Get(ctx, "member-"+m.ID, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return rollout.RolledOut(dep)
		})
		if err != nil {
			return err
		}
		info("%s: Deployment and Service member-%s, query_endpoint %s", m.ID, m.ID, m.URL)
	}
	return nil
}

// applyGateways creates the sample Gateway with the demo's members and token issuer in
// its inline configuration, and a copy of it with drainDelay 0s.
func (d *localDemo) applyGateways(ctx context.Context, samplePath string) ([]*demoGateway, error) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		return nil, err
	}
	var sample map[string]any
	if err := yaml.Unmarshal(data, &sample); err != nil {
		return nil, fmt.Errorf("%s: %w", samplePath, err)
	}
	if sample["kind"] != "Gateway" {
		return nil, fmt.Errorf("%s: kind %v, want Gateway", samplePath, sample["kind"])
	}
	name, _, _ := unstructured.NestedString(sample, "metadata", "name")
	inline, _, _ := unstructured.NestedString(sample, "spec", "config", "inline")
	// The sample's members name Services of its own; the demo's replace them.
	if i := strings.Index(inline, "[[registry.members]]"); i >= 0 {
		inline = inline[:i]
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(inline, "\n") + "\n\n")
	for _, m := range d.members {
		fmt.Fprintf(&b, "[[registry.members]]\nid = %q\nquery_endpoint = %q\n\n", m.ID, m.URL)
	}
	b.WriteString(d.issuer.TOMLIssuer())
	delay, _, _ := unstructured.NestedString(sample, "spec", "lifecycle", "drainDelay")

	step(fmt.Sprintf("Applying the sample Gateway (%s) as %s/%s, and %s/%s-nodelay with drainDelay 0s", samplePath, d.ns, name, d.ns, name))
	info("both with image %s, the members above and a demo token issuer (of the data plane's and the operator's tokens) in spec.config.inline", d.image)
	var out []*demoGateway
	for _, g := range []*demoGateway{{name: name, drainDelay: delay}, {name: name + "-nodelay", drainDelay: "0s"}} {
		obj := &unstructured.Unstructured{Object: deepCopy(sample)}
		obj.SetName(g.name)
		obj.SetNamespace(d.ns)
		_ = unstructured.SetNestedField(obj.Object, d.image, "spec", "image")
		_ = unstructured.SetNestedField(obj.Object, b.String(), "spec", "config", "inline")
		if g.drainDelay != delay {
			_ = unstructured.SetNestedField(obj.Object, g.drainDelay, "spec", "lifecycle", "drainDelay")
		}
		// Through the operator's webhook (the chart installs it), as kubectl apply would.
		created, err := d.dyn.Resource(rollout.GatewayGVR).Namespace(d.ns).Create(ctx, obj, metav1.CreateOptions{FieldManager: "ferrofed-demo"})
		if err != nil {
			return nil, fmt.Errorf("create Gateway %s: %w", g.name, err)
		}
		g.obj = created
		info("gateway.ferrofed.io/%s created (spec.lifecycle.drainDelay %s)", g.name, orUnset(g.drainDelay))
		out = append(out, g)
	}
	return out, nil
}

// waitReady waits for both Gateways: Deployments rolled out, Ready True, both pods in
// the Service's endpoints, and those endpoints on this machine (the load goes there).
func (d *localDemo) waitReady(ctx context.Context, gws []*demoGateway) error {
	step("Waiting for the gateway pods: the kubelet starts them and the derived probes pass")
	return d.poll(ctx, 4*time.Minute, "both Gateways READY True", func(ctx context.Context) (bool, string) {
		var parts []string
		done := true
		for _, g := range gws {
			obj, err := d.dyn.Resource(rollout.GatewayGVR).Namespace(d.ns).Get(ctx, g.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			g.obj = obj
			st, _ := rollout.Condition(obj, "Ready")
			ready, _, _ := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
			parts = append(parts, fmt.Sprintf("%s: %d/2 pods ready, READY %s", g.name, ready, st))
			if st != "True" {
				done = false
				continue
			}
			if g.baseURL == "" {
				if err := d.resolve(ctx, g); err != nil {
					done = false
					parts[len(parts)-1] += " (" + err.Error() + ")"
				}
			}
		}
		return done, strings.Join(parts, "; ")
	})
}

// waitRouted waits until each Gateway's Service really reaches its gateway pods: the
// EndpointSlice lists them once they are ready, but kube-proxy writes its rules a
// moment later, and a ClusterIP freed a moment ago (by an earlier run) can still lead
// to the old pods until it does. Routed means 20 fresh connections in a row answered
// by a serving gateway's readiness.
func (d *localDemo) waitRouted(ctx context.Context, gws []*demoGateway) error {
	step("Waiting for the Services to route to the gateway pods (kube-proxy's rules)")
	return d.poll(ctx, 2*time.Minute, "the Services routing to the gateway pods", func(ctx context.Context) (bool, string) {
		var parts []string
		done := true
		for _, g := range gws {
			ok, why := rollout.Routed(ctx, g.baseURL, 20)
			done = done && ok
			parts = append(parts, g.name+": "+why)
		}
		return done, strings.Join(parts, "; ")
	})
}

// resolve finds a Ready Gateway's Deployment, its grace period and its Service's URL.
func (d *localDemo) resolve(ctx context.Context, g *demoGateway) error {
	dep, err := rollout.OwnedDeployment(ctx, d.kube, d.ns, g.obj.GetUID())
	if err != nil {
		return err
	}
	svc, err := rollout.OwnedService(ctx, d.kube, d.ns, g.obj.GetUID())
	if err != nil {
		return err
	}
	addrs, err := rollout.EndpointAddrs(ctx, d.kube, svc)
	if err != nil {
		return err
	}
	if len(addrs) != 2 {
		return fmt.Errorf("endpoints %v", addrs)
	}
	if ok, why := rollout.OnThisMachine(addrs); !ok {
		return errors.New(why)
	}
	base, _, _ := unstructured.NestedString(g.obj.Object, "spec", "basePath")
	g.deployment = dep
	g.grace = *dep.Spec.Template.Spec.TerminationGracePeriodSeconds
	g.baseURL = "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port)) + strings.TrimSuffix(base, "/")
	return nil
}

// ---------------------------------------------------------------------------- what the operator derived

func (d *localDemo) showDerived(ctx context.Context, gws []*demoGateway) error {
	for _, g := range gws {
		step(fmt.Sprintf("What the operator derived for %s (read back from the live Deployment and ConfigMap)", g.name))
		obj := g.obj.Object
		lc, _, _ := unstructured.NestedMap(obj, "spec", "lifecycle")
		lcJSON, _ := json.Marshal(lc)
		info("spec.lifecycle:                %s", lcJSON)
		bd, _, _ := unstructured.NestedMap(obj, "status", "gracePeriod")
		bdJSON, _ := json.Marshal(bd)
		info("status.gracePeriod:            %s", bdJSON)
		spec := g.deployment.Spec.Template.Spec
		info("terminationGracePeriodSeconds: %d", *spec.TerminationGracePeriodSeconds)
		c := spec.Containers[0]
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
		}{{"startupProbe", c.StartupProbe}, {"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}} {
			if p.probe == nil {
				info("%-15s none", p.name+":")
				continue
			}
			what := "exec"
			if h := p.probe.HTTPGet; h != nil {
				what = fmt.Sprintf("%s %s port %s", h.Scheme, h.Path, h.Port.String())
			}
			info("%-15s %s, every %ds, %d failures", p.name+":", what, p.probe.PeriodSeconds, p.probe.FailureThreshold)
		}
		s := g.deployment.Spec.Strategy
		if ru := s.RollingUpdate; ru != nil {
			info("strategy:                      %s, maxSurge %s, maxUnavailable %s", s.Type, ru.MaxSurge, ru.MaxUnavailable)
		}
		for _, v := range spec.Volumes {
			if v.ConfigMap == nil {
				continue
			}
			cm, err := d.kube.CoreV1().ConfigMaps(d.ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			info("the drain keys rendered into ConfigMap %s (ferrofed.toml):", cm.Name)
			for _, l := range strings.Split(cm.Data["ferrofed.toml"], "\n") {
				k := strings.TrimSpace(l)
				for _, key := range []string{"drain_delay_ms", "shutdown_timeout_ms", "bindings_drain_timeout_ms", "request_timeout_ms", "termination_grace_period_seconds", "termination_message_path"} {
					if strings.HasPrefix(k, key+" ") || strings.HasPrefix(k, key+"=") {
						info("  %s", k)
					}
				}
			}
		}
	}
	step("kubectl get fgw -n " + d.ns)
	out, err := exec.CommandContext(ctx, d.kubectl, "--kubeconfig", d.kcfg, "get", "fgw", "-n", d.ns).CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		info("%s", l)
	}
	if err != nil {
		return fmt.Errorf("kubectl get fgw: %w", err)
	}
	return nil
}

// ---------------------------------------------------------------------------- routes

func (d *localDemo) tryRoutes(ctx context.Context, g *demoGateway) {
	step(fmt.Sprintf("The routes, answered through the Service of %s (%s)", g.name, g.baseURL))
	// The data plane asks every request for a bearer token (auth.data_plane =
	// "required", the default): the demo's client has one of the demo issuer, the
	// dependency report the operator's.
	client, operator := filepath.Join(d.state, "client-token"), filepath.Join(d.state, "token")
	tokens := map[string]string{client: d.issuer.ClientToken(24 * time.Hour), operator: d.issuer.Token(d.issuer.Scope, 24*time.Hour)}
	for file, token := range tokens {
		_ = os.WriteFile(file, []byte(token+"\n"), 0o600)
	}
	first := true
	for _, r := range []struct {
		what, path, tokenFile string
	}{
		{"liveness", "/health", ""},
		{"readiness", "/health/readiness", ""},
		{"a federated search over both members (client token, scope " + rollout.ClientScope + ")", "/fhir/Patient?family=Smith", client},
		{"a request routed to one member (client token)", "/nodes/node-a/fhir/Patient", client},
		{"one patient read back by its federated id, {member}.{id} (client token)", "/fhir/Patient/node-a.node-a-1", client},
		{"the same search without a token: 401 (auth.data_plane = \"required\", the default)", "/fhir/Patient?family=Smith", ""},
		{"the dependency report (operator token)", "/operator/dependencies", operator},
	} {
		fmt.Printf("\n    %s%s%s\n", bold, r.what, reset)
		if r.tokenFile != "" {
			info("curl -s -H \"Authorization: Bearer $(cat %s)\" '%s%s'", r.tokenFile, g.baseURL, r.path)
		} else {
			info("curl -s '%s%s'", g.baseURL, r.path)
		}
		answer := answer(ctx, g.baseURL+r.path, tokens[r.tokenFile])
		info("%s%s%s", dim, answer, reset)
		if first && !strings.HasPrefix(answer, "error") {
			first = false
			info("(first answer %s after `make demo` started)", time.Since(d.t0).Round(time.Second))
		}
	}
}

// answer is one GET's status line and up to 300 bytes of its body, on one line.
func answer(ctx context.Context, url, bearer string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 300))
	return res.Status + "  " + strings.Join(strings.Fields(string(body)), " ")
}

// ---------------------------------------------------------------------------- rollout under load

// restartUnderLoad runs one `kubectl rollout restart` of a Gateway's Deployment under a
// steady load, with a live line, and returns its summary line.
func (d *localDemo) restartUnderLoad(ctx context.Context, g *demoGateway) (string, error) {
	obj, err := d.dyn.Resource(rollout.GatewayGVR).Namespace(d.ns).Get(ctx, g.name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	readyBefore, _ := rollout.Condition(obj, "Ready")
	delay := orUnset(g.drainDelay)
	step(fmt.Sprintf("%s: drainDelay %s, grace period %d s, READY %s before the restart", g.name, delay, g.grace, readyBefore))

	replicas := int32(2)
	if g.deployment.Spec.Replicas != nil {
		replicas = *g.deployment.Spec.Replicas
	}
	live := &liveState{drains: map[string]string{}}
	rec, err := rollout.Record(d.kube, d.ns, metav1.FormatLabelSelector(g.deployment.Spec.Selector), rollout.Hooks{
		Deleting: func(pod string, grace int64) {
			d.event(live, "%s: deleted, the kubelet sends SIGTERM (grace period %d s)", pod, grace)
			live.set(pod, "SIGTERM")
		},
		Line: func(pod, line string) {
			if s := drainStep(line); s != "" {
				d.event(live, "%s: %s", pod, s)
				live.set(pod, strings.TrimSuffix(strings.Fields(s)[0], ":"))
			}
		},
		Ended: func(e rollout.PodEnd) {
			d.event(live, "%s: gone: %s", e.Name, describeEnd(e))
			live.done(e.Name)
		},
	})
	if err != nil {
		return "", err
	}
	progress := &rollout.Progress{}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	results := make(chan rollout.LoadResult, 1)
	go func() {
		results <- rollout.RunLoad(loadCtx, rollout.LoadSpec{
			URL: g.baseURL + "/nodes/node-a/fhir/Patient", RPS: d.rps,
			MaxLength: 4 * time.Minute, Timeout: 30 * time.Second, Progress: progress,
			Token: d.issuer.ClientToken(time.Hour), // the data plane asks for one
		})
	}()
	start := time.Now()
	stopLive := d.liveLine(live, func() string {
		return fmt.Sprintf("[%3.0fs] requests %d  failures %d  pods replaced %d/%d  %s",
			time.Since(start).Seconds(), progress.Sent.Load(), progress.Failed.Load(), rec.Ended(), replicas, live.draining())
	})
	stopped := false
	finish := func() {
		if !stopped {
			stopped = true
			stopLive()
		}
	}
	defer finish()
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return "", err
	}
	d.event(live, "kubectl rollout restart deployment/%s -n %s", g.deployment.Name, d.ns)
	if out, err := exec.CommandContext(ctx, d.kubectl, "--kubeconfig", d.kcfg, "rollout", "restart", "deployment/"+g.deployment.Name, "-n", d.ns).CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubectl rollout restart: %w: %s", err, out)
	}
	// Done when the new pods are rolled out and every old one has gone.
	err = d.pollQuiet(ctx, 4*time.Minute, func(ctx context.Context) (bool, string) {
		dep, err := d.kube.AppsV1().Deployments(d.ns).Get(ctx, g.deployment.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok, detail := rollout.RolledOut(dep)
		return ok && rec.Ended() >= int(replicas), detail
	})
	if err != nil {
		return "", fmt.Errorf("the rollout of %s: %w", g.name, err)
	}
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return "", err
	}
	stopLoad()
	res := <-results
	ended := rec.Stop()
	finish()
	var longest rollout.PodEnd
	var longestDrain time.Duration
	for _, e := range ended {
		if e.Took > longest.Took {
			longest = e
		}
		if tm, err := lifecycle.ParseTerminationMessage([]byte(e.Message)); err == nil && tm.Drain > longestDrain {
			longestDrain = tm.Drain
		}
	}
	info("load: %s", res)
	for i, ex := range res.Examples {
		if i == 3 {
			break
		}
		info("  failed: %s", ex)
	}
	// longest-termination is the kubelet's (SIGTERM to the container's end, in whole
	// seconds as the API keeps them); longest-drain the gateway's own, from its
	// termination message.
	return fmt.Sprintf("demo summary: gateway=%s drainDelay=%s ready-before-restart=%s requests=%d failures=%d pods-replaced=%d longest-termination=%s longest-drain=%s grace=%ds",
		g.name, delay, readyBefore, res.Requests, res.Failures, len(ended), longest.Took.Round(100*time.Millisecond),
		longestDrain.Round(time.Millisecond), g.grace), nil
}

// liveState is what the live line shows of the pods draining.
type liveState struct {
	mu     sync.Mutex
	drains map[string]string // pod -> its last drain step
	line   string            // the live line last printed, to print again after an event
}

func (l *liveState) set(pod, stepName string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drains[pod] = stepName
}

func (l *liveState) done(pod string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.drains, pod)
}

func (l *liveState) draining() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.drains) == 0 {
		return ""
	}
	names := make([]string, 0, len(l.drains))
	for p := range l.drains {
		names = append(names, p)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, p := range names {
		parts = append(parts, p+" "+l.drains[p])
	}
	return "| draining: " + strings.Join(parts, ", ")
}

// liveLine prints line() every second: in place on a terminal, else every 5 s. The
// returned function stops it and prints the last line for good.
func (d *localDemo) liveLine(l *liveState, line func() string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-stop:
				d.out.Lock()
				if d.tty {
					fmt.Printf("\r\033[K")
				}
				fmt.Printf("    %s\n", line())
				d.out.Unlock()
				return
			case <-tick.C:
				n++
				s := line()
				d.out.Lock()
				l.mu.Lock()
				l.line = s
				l.mu.Unlock()
				if d.tty {
					fmt.Printf("\r\033[K    %s", s)
				} else if n%5 == 0 {
					fmt.Printf("    %s\n", s)
				}
				d.out.Unlock()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// event prints a line above the live line.
func (d *localDemo) event(l *liveState, format string, args ...any) {
	d.out.Lock()
	defer d.out.Unlock()
	msg := fmt.Sprintf(format, args...)
	stamp := time.Now().Format("15:04:05.0")
	if d.tty {
		l.mu.Lock()
		last := l.line
		l.mu.Unlock()
		fmt.Printf("\r\033[K      %s %s\n    %s", stamp, msg, last)
		return
	}
	fmt.Printf("      %s %s\n", stamp, msg)
}

// drainStep describes a drain line of the gateway's JSON log, or "" for other lines.
func drainStep(line string) string {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return ""
	}
	msg, _ := m["msg"].(string)
	sig, _ := m["signal"].(string)
	switch {
	case msg == "Drain step finished" && sig == string(lifecycle.SignalShutdownInitiated):
		return fmt.Sprintf("%s: readiness answers 503, the listener still accepts", sig)
	case msg == "Drain step finished":
		what := map[string]string{
			"DrainDelayElapsed": "step 1, the drain delay, over",
			"ListenerClosed":    "step 2, listener closed",
			"InFlightDrained":   "step 3, in-flight requests done",
			"BindingsStopped":   "step 4, bindings stopped",
		}[sig]
		s := fmt.Sprintf("%s after %v: %s", sig, m["took"], what)
		if o, ok := m["outcome"]; ok {
			s += fmt.Sprintf(" (%v)", o)
		}
		return s
	case msg == "Drained":
		return fmt.Sprintf("Drained in %v, %v", m["took"], m["outcome"])
	}
	return ""
}

// describeEnd is how a pod ended, with the drain its termination message reports.
func describeEnd(e rollout.PodEnd) string {
	s := fmt.Sprintf("exit %d (%s) %s after SIGTERM, grace period %d s", e.ExitCode, e.Reason, e.Took.Round(100*time.Millisecond), e.Grace)
	if e.Message == "" {
		return s + "; no termination message"
	}
	tm, err := lifecycle.ParseTerminationMessage([]byte(e.Message))
	if err != nil {
		return s + "; termination message: " + err.Error()
	}
	return fmt.Sprintf("%s; termination message: %s in %s (delay %s, listener %s, in-flight %s, bindings %s)", s, tm.Outcome,
		tm.Drain, tm.Steps.DrainDelay, tm.Steps.ListenerClosed, tm.Steps.InFlight, tm.Steps.Bindings)
}

// ---------------------------------------------------------------------------- small helpers

// poll checks every second until check is done, showing its detail with the elapsed
// time (in place on a terminal), for at most timeout.
func (d *localDemo) poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (bool, string)) error {
	start := time.Now()
	last := ""
	err := d.pollQuiet(ctx, timeout, func(ctx context.Context) (bool, string) {
		ok, detail := check(ctx)
		line := fmt.Sprintf("[%3.0fs] %s", time.Since(start).Seconds(), detail)
		switch {
		case d.tty:
			fmt.Printf("\r\033[K    %s", line)
		case detail != last:
			fmt.Printf("    %s\n", line)
		}
		last = detail
		return ok, detail
	})
	if d.tty {
		fmt.Println()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	info("done in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (d *localDemo) pollQuiet(ctx context.Context, timeout time.Duration, check func(context.Context) (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	detail := ""
	for {
		var ok bool
		if ok, detail = check(ctx); ok {
			return nil
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			return fmt.Errorf("not done after %s: %s", timeout, detail)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func deepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

func orUnset(s string) string {
	if s == "" {
		return "(unset: derived from the readiness probe)"
	}
	return s
}

// warningPrinter prints the API server's warnings (the webhook's among them) as lines
// of the demo.
type warningPrinter struct{}

func (warningPrinter) HandleWarningHeader(_ int, _ string, text string) {
	info("warning from the API server (the operator's webhook): %s", text)
}

var bold, dim, reset = "", "", ""

func init() {
	if st, err := os.Stdout.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		bold, dim, reset = "\033[1m", "\033[2m", "\033[0m"
	}
}

func step(s string) { fmt.Printf("\n%s==> %s%s\n", bold, s, reset) }

func info(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }
