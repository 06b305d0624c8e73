// Command gracecheck is the engine of the release checks hack/checks/kubernetes-example.sh
// and hack/checks/release-compose.sh: it reads the drain budgets of every ferrofed
// gateway an example defines, and fails when the runtime's grace period does not
// outlast them.
//
//	gracecheck kubernetes PATH...   Gateway resources, and Deployments running `ferrofed serve`
//	gracecheck compose PATH...      compose files whose services run ferrofed
//
// A PATH is a file or a folder (its *.yaml and *.yml files). The three budgets, drain
// delay, shutdown timeout and bindings drain timeout, must be set in the example's own
// configuration: the Gateway's spec.lifecycle, or the ferrofed.toml the container is
// started with. An example that leaves one of them out fails: a release must not ship a
// grace period that holds only as long as a default does not change. Once they are
// there, the drain is what the product computes: gateway/lifecycle's plan of the
// Gateway, or of the ferrofed.toml as `config check` loads it (which must accept it).
//
// It prints one line per gateway, "ok:" or "FAIL:", and exits 1 when any failed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/pelletier/go-toml/v2"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

func main() {
	if len(os.Args) < 3 || (os.Args[1] != "kubernetes" && os.Args[1] != "compose") {
		fmt.Fprintln(os.Stderr, "usage: gracecheck kubernetes|compose PATH...")
		os.Exit(2)
	}
	files, err := expand(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	var results []result
	if os.Args[1] == "kubernetes" {
		results = checkKubernetes(files)
	} else {
		results = checkCompose(files)
	}
	failed := 0
	for _, r := range results {
		if r.err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "FAIL: %s: %v\n", r.subject, r.err)
		} else {
			fmt.Printf("ok: %s: %s\n", r.subject, r.detail)
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "%d of %d gateway(s) failed the grace-period check\n", failed, len(results))
		os.Exit(1)
	}
}

// result is the verdict on one gateway an example defines.
type result struct {
	subject string // file and object, e.g. `examples/compose/compose.yaml: service "gateway"`
	detail  string
	err     error
}

// expand turns folders into their YAML files, sorted; files are kept as given.
func expand(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, _ := filepath.Glob(filepath.Join(p, pat))
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no *.yaml or *.yml file in this folder", p)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// verdict compares the grace period the runtime gives with the drain of plan, the
// budgets as gateway/lifecycle resolves them, each named by its key or field in fields.
func verdict(graceName string, grace time.Duration, plan lifecycle.Plan, fields lifecycle.Fields) (string, error) {
	drain := fmt.Sprintf("%s %s + %s %s + %s %s", fields.DrainDelay, plan.DrainDelay,
		fields.ShutdownTimeout, plan.ShutdownTimeout, fields.BindingsDrainTimeout, plan.BindingsDrainTimeout)
	sum := plan.Drain()
	if grace <= sum {
		return "", fmt.Errorf("%s %s does not outlast %s = %s: the runtime would kill the gateway before its drain ends; raise %s above %s",
			graceName, grace, drain, sum, graceName, sum)
	}
	return fmt.Sprintf("%s %s outlasts %s = %s (room %s)", graceName, grace, drain, sum, grace-sum), nil
}

// missing builds the error for budgets an example leaves to the defaults.
func missing(where string, names []string) error {
	return fmt.Errorf("%s does not set %s: each example must set drain delay, shutdown timeout and bindings drain timeout explicitly (the check copies no default from the code)",
		where, strings.Join(names, ", "))
}

// ---- YAML helpers -------------------------------------------------------------------

type obj = map[string]any

func readDocs(file string) ([]obj, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []obj
	for {
		var d obj
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not valid YAML: %w", file, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a path of map keys.
func get(o any, path ...string) (any, bool) {
	for _, k := range path {
		m, ok := o.(obj)
		if !ok {
			return nil, false
		}
		if o, ok = m[k]; !ok || o == nil {
			return nil, false
		}
	}
	return o, true
}

func getString(o any, path ...string) string {
	v, _ := get(o, path...)
	s, _ := v.(string)
	return s
}

func getList(o any, path ...string) []any {
	v, _ := get(o, path...)
	l, _ := v.([]any)
	return l
}

func stringList(l []any) []string {
	out := make([]string, 0, len(l))
	for _, v := range l {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// integer reads a YAML or TOML integer.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case float64:
		return int64(n), n == math.Trunc(n)
	}
	return 0, false
}

// configFlag returns the value of --config in a command line, or "".
func configFlag(argv []string) string {
	for i, a := range argv {
		if a == "--config" || a == "-config" {
			if i+1 < len(argv) {
				return argv[i+1]
			}
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
	}
	return ""
}

func runsServe(argv []string) bool {
	for _, a := range argv {
		if a == "serve" {
			return true
		}
	}
	return false
}

// tomlPlan checks that a ferrofed.toml sets the three budgets, then loads it as
// `config check` does and returns its lifecycle plan.
func tomlPlan(where string, data []byte) (lifecycle.Plan, error) {
	var doc obj
	if err := toml.Unmarshal(data, &doc); err != nil {
		return lifecycle.Plan{}, fmt.Errorf("%s: not valid TOML: %w", where, err)
	}
	var absent []string
	for _, k := range []string{"drain_delay_ms", "shutdown_timeout_ms", "bindings_drain_timeout_ms"} {
		if _, ok := get(doc, "server", k); !ok {
			absent = append(absent, "server."+k)
		}
	}
	if len(absent) > 0 {
		return lifecycle.Plan{}, missing(where, absent)
	}
	// The files an example names (TLS, JWKS) live where it runs, not here.
	cfg, err := config.Parse(data, where, config.Options{SkipFiles: true})
	if err != nil {
		return lifecycle.Plan{}, fmt.Errorf("config check refuses it: %w", err)
	}
	return cfg.Lifecycle(), nil
}

// ---- Kubernetes ----------------------------------------------------------------------

type located struct {
	file string
	doc  obj
}

func checkKubernetes(files []string) []result {
	var all []located
	for _, f := range files {
		docs, err := readDocs(f)
		if err != nil {
			return []result{{subject: f, err: err}}
		}
		for _, d := range docs {
			all = append(all, located{f, d})
		}
	}
	configMaps := map[string]located{}
	for _, l := range all {
		if getString(l.doc, "kind") == "ConfigMap" {
			configMaps[getString(l.doc, "metadata", "namespace")+"/"+getString(l.doc, "metadata", "name")] = l
		}
	}
	var out []result
	for _, l := range all {
		kind := getString(l.doc, "kind")
		name := getString(l.doc, "metadata", "name")
		subject := fmt.Sprintf("%s: %s %q", l.file, kind, name)
		switch {
		case kind == "Gateway" && strings.HasPrefix(getString(l.doc, "apiVersion"), "ferrofed.io/"):
			detail, err := checkGateway(l.doc)
			out = append(out, result{subject, detail, err})
		case kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet":
			ns := getString(l.doc, "metadata", "namespace")
			pod, _ := get(l.doc, "spec", "template", "spec")
			for _, c := range getList(pod, "containers") {
				argv := append(stringList(getList(c, "command")), stringList(getList(c, "args"))...)
				if !runsServe(argv) {
					continue
				}
				sub := fmt.Sprintf("%s container %q", subject, getString(c, "name"))
				detail, err := checkPod(ns, pod, c, argv, configMaps)
				out = append(out, result{sub, detail, err})
			}
		}
	}
	if len(out) == 0 {
		return []result{{subject: strings.Join(files, ", "), err: errors.New("no ferrofed Gateway resource and no workload running `ferrofed serve` found")}}
	}
	return out
}

// checkGateway reads spec.lifecycle of a Gateway resource. Its grace period is the
// explicit terminationGracePeriodSeconds, or the one the operator derives from the
// example's own terminationHeadroom; both come from gateway/lifecycle's plan of the
// Gateway, as the operator makes it.
func checkGateway(doc obj) (string, error) {
	lc, _ := get(doc, "spec", "lifecycle")
	var absent []string
	for _, f := range []string{"drainDelay", "shutdownTimeout", "bindingsDrainTimeout"} {
		if getString(lc, f) == "" {
			absent = append(absent, "spec.lifecycle."+f)
		}
	}
	if len(absent) > 0 {
		return "", missing("spec.lifecycle", absent)
	}
	_, explicit := get(lc, "terminationGracePeriodSeconds")
	if _, ok := get(lc, "terminationHeadroom"); !ok && !explicit {
		return "", errors.New("spec.lifecycle sets neither terminationGracePeriodSeconds nor terminationHeadroom: the grace period cannot be known without copying a default from the code")
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	var gw ferrofedv1alpha1.Gateway
	if err := json.Unmarshal(raw, &gw); err != nil {
		return "", fmt.Errorf("not a Gateway: %w", err)
	}
	plan := gatewayspec.Plan(&gw.Spec)
	name := "spec.lifecycle.terminationGracePeriodSeconds"
	if !plan.GracePeriodExplicit {
		name = fmt.Sprintf("derived grace period (ceil(drain + terminationHeadroom %s))", plan.TerminationHeadroom)
	}
	detail, err := verdict(name, time.Duration(plan.GracePeriodSeconds)*time.Second, plan, gatewayspec.LifecycleFields)
	if err != nil {
		return "", err
	}
	// The rest of what admission would refuse (e.g. a shutdown shorter than the request).
	if ps := gatewayspec.Budgets(&gw.Spec).Validate(gatewayspec.LifecycleFields); len(ps) > 0 {
		return "", errors.Join(problemErrors(ps)...)
	}
	return detail, nil
}

func problemErrors(ps []lifecycle.Problem) []error {
	out := make([]error, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// checkPod finds the ferrofed.toml a container is started with (a ConfigMap mounted at
// the --config path) and compares its budgets with the pod's grace period.
func checkPod(ns string, pod, container any, argv []string, configMaps map[string]located) (string, error) {
	path := configFlag(argv)
	if path == "" {
		return "", errors.New("runs `ferrofed serve` without --config: the check reads the budgets from the file --config names")
	}
	cmName, key, err := mountedConfigMap(pod, container, path)
	if err != nil {
		return "", err
	}
	cm, ok := configMaps[ns+"/"+cmName]
	if !ok {
		return "", fmt.Errorf("--config %s comes from ConfigMap %q, which is not among the files checked", path, cmName)
	}
	data := getString(cm.doc, "data", key)
	if data == "" {
		return "", fmt.Errorf("ConfigMap %q in %s has no key %q for --config %s", cmName, cm.file, key, path)
	}
	plan, err := tomlPlan(fmt.Sprintf("ConfigMap %q key %q (%s)", cmName, key, cm.file), []byte(data))
	if err != nil {
		return "", err
	}
	v, ok := get(pod, "terminationGracePeriodSeconds")
	if !ok {
		return "", errors.New("spec.template.spec.terminationGracePeriodSeconds is not set: set it explicitly above the drain (Kubernetes' default is not the example's)")
	}
	n, ok := integer(v)
	if !ok {
		return "", fmt.Errorf("spec.template.spec.terminationGracePeriodSeconds = %v is not an integer", v)
	}
	return verdict("terminationGracePeriodSeconds", time.Duration(n)*time.Second, plan, lifecycle.TOMLFields)
}

// mountedConfigMap returns the ConfigMap and key that hold the file at path in container.
func mountedConfigMap(pod, container any, path string) (string, string, error) {
	volumes := map[string]any{}
	for _, v := range getList(pod, "volumes") {
		volumes[getString(v, "name")] = v
	}
	for _, m := range getList(container, "volumeMounts") {
		mount := strings.TrimSuffix(getString(m, "mountPath"), "/")
		sub := getString(m, "subPath")
		var rel string
		switch {
		case sub != "" && mount == path:
			rel = sub
		case sub == "" && strings.HasPrefix(path, mount+"/"):
			rel = strings.TrimPrefix(path, mount+"/")
		default:
			continue
		}
		vol := volumes[getString(m, "name")]
		cm := getString(vol, "configMap", "name")
		if cm == "" {
			return "", "", fmt.Errorf("--config %s is mounted from volume %q, which is not a ConfigMap", path, getString(m, "name"))
		}
		key := rel
		for _, it := range getList(vol, "configMap", "items") {
			if getString(it, "path") == rel {
				key = getString(it, "key")
			}
		}
		return cm, key, nil
	}
	return "", "", fmt.Errorf("--config %s is not on any volume mounted into the container", path)
}

// ---- compose -------------------------------------------------------------------------

func checkCompose(files []string) []result {
	var out []result
	for _, f := range files {
		docs, err := readDocs(f)
		if err != nil {
			out = append(out, result{subject: f, err: err})
			continue
		}
		if len(docs) != 1 {
			out = append(out, result{subject: f, err: errors.New("a compose file holds exactly one YAML document")})
			continue
		}
		services, _ := get(docs[0], "services")
		names := make([]string, 0)
		if m, ok := services.(obj); ok {
			for n := range m {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		found := 0
		for _, n := range names {
			svc, _ := get(services, n)
			file, target, ok := composeConfig(f, svc)
			if !ok {
				continue
			}
			found++
			subject := fmt.Sprintf("%s: service %q", f, n)
			detail, err := checkService(svc, file, target)
			out = append(out, result{subject, detail, err})
		}
		if found == 0 {
			out = append(out, result{subject: f, err: errors.New("no service mounts a ferrofed.toml (a *.toml file mounted as a volume or config): nothing to check")})
		}
	}
	return out
}

// composeConfig returns the host file and container path of the ferrofed.toml a service
// mounts: from --config in its command when set, else its one mounted *.toml file.
func composeConfig(composeFile string, svc any) (string, string, bool) {
	dir := filepath.Dir(composeFile)
	type mount struct{ source, target string }
	var mounts []mount
	for _, v := range getList(svc, "volumes") {
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			if len(parts) >= 2 {
				mounts = append(mounts, mount{parts[0], parts[1]})
			}
		case obj:
			mounts = append(mounts, mount{getString(v, "source"), getString(v, "target")})
		}
	}
	for _, c := range getList(svc, "configs") {
		if m, ok := c.(obj); ok {
			mounts = append(mounts, mount{"config:" + getString(m, "source"), getString(m, "target")})
		}
	}
	want := configFlag(commandOf(svc))
	for _, m := range mounts {
		if (want != "" && m.target == want) || (want == "" && strings.HasSuffix(m.target, ".toml")) {
			src := m.source
			if !filepath.IsAbs(src) && !strings.HasPrefix(src, "config:") {
				src = filepath.Join(dir, src)
			}
			return src, m.target, true
		}
	}
	return "", "", false
}

func commandOf(svc any) []string {
	v, _ := get(svc, "command")
	switch c := v.(type) {
	case string:
		return strings.Fields(c)
	case []any:
		return stringList(c)
	}
	return nil
}

func checkService(svc any, file, target string) (string, error) {
	if strings.HasPrefix(file, "config:") {
		return "", fmt.Errorf("%s comes from config %q: mount it from a file so the check can read it", target, strings.TrimPrefix(file, "config:"))
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the ferrofed.toml mounted at %s: %w", target, err)
	}
	plan, err := tomlPlan(file, data)
	if err != nil {
		return "", err
	}
	v, ok := get(svc, "stop_grace_period")
	if !ok {
		return "", fmt.Errorf("stop_grace_period is not set: set it explicitly above the drain of %s (Docker's default of 10s is not the example's)", file)
	}
	grace, err := composeDuration(v)
	if err != nil {
		return "", fmt.Errorf("stop_grace_period = %v: %w", v, err)
	}
	detail, err := verdict("stop_grace_period", grace, plan, lifecycle.TOMLFields)
	if err != nil {
		return "", fmt.Errorf("%w (budgets from %s)", err, file)
	}
	return detail + " (budgets from " + file + ")", nil
}

// composeDuration reads a compose duration: "1m30s", "50s", or a bare number of seconds.
func composeDuration(v any) (time.Duration, error) {
	if n, ok := integer(v); ok {
		return time.Duration(n) * time.Second, nil
	}
	s := fmt.Sprint(v)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration: %w", err)
	}
	return d, nil
}
