//go:build e2e

// Package e2e proves ferrofed on a real Kubernetes cluster, through the real API and
// real pods: the chart installs the operator, its webhook and the CRD's CEL rules refuse
// invalid Gateways, a Gateway's pods become Ready through the derived probes,
// rolling restarts under load drop no request while a drainDelay of 0 does, and a
// gateway container SIGKILLed inside its pod loses no audit record.
//
// It runs against the cluster KUBECONFIG names (`make e2e`): the local one
// hack/local-cluster.sh builds, or any real cluster whose nodes have the images
// (FERROFED_E2E_IMAGE, FERROFED_E2E_MEMBER_IMAGE, FERROFED_E2E_AUDIT_REPO_IMAGE,
// FERROFED_E2E_PMIR_IMAGE; imagePullPolicy Never). The load steps send requests from
// this process to the gateway Service's ClusterIP, which kube-proxy makes reachable on
// a node: they run only when the Service's endpoints are on this machine, and skip
// otherwise. The SIGKILL step also needs the node's containerd socket (ctr) on this
// machine.
//
// Volumes: TestVolumeProvisioner proves the cluster's provisioner with claims of the
// StorageClass FERROFED_E2E_STORAGE_CLASS (default local-path, which hack/local-cluster.sh
// installs) and pods of an image with /bin/sh (FERROFED_E2E_SHELL_IMAGE); the persistent
// audit spool scenario (TestAuditPersistentSpool) runs with the rest, or alone with
// make e2e-audit-persistent.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// settings are read once from the environment.
type settings struct {
	kubeconfig  string
	image       string // the ferrofed image (operator and gateway)
	memberImage string // the FHIR member test server image
	// auditRepoImage is the audit record repository double (test/doubles/auditrepo/cmd/auditrepo).
	auditRepoImage string
	// pmirImage is the PMIR Patient Identity Registry double (test/doubles/identityregistry/cmd/pmir).
	pmirImage  string
	helm       string
	operatorNS string
	namespace  string // where the Gateways and members run
	rps        int
	rollouts   int
	keep       bool // leave the namespaces and the release for a look afterwards
	// continueOnFailure runs the steps after a failed one (for debugging the suite).
	continueOnFailure bool
	// loadPath and slowLoadPath are what the load asks the gateway: a member answering
	// at once, and one answering after slowMemberDelay, longer than the drain delay.
	loadPath, slowLoadPath string
	repoRoot               string
	stepTimeout            time.Duration
	loadMaxLength          time.Duration
}

var cfg settings

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	cfg = settings{
		kubeconfig:        os.Getenv("KUBECONFIG"),
		image:             env("FERROFED_E2E_IMAGE", "ferrofed.local/ferrofed:e2e"),
		memberImage:       env("FERROFED_E2E_MEMBER_IMAGE", "ferrofed.local/fhir-member:e2e"),
		auditRepoImage:    env("FERROFED_E2E_AUDIT_REPO_IMAGE", "ferrofed.local/audit-repo:e2e"),
		pmirImage:         env("FERROFED_E2E_PMIR_IMAGE", "ferrofed.local/pmir:e2e"),
		helm:              env("FERROFED_E2E_HELM", filepath.Join(root, "bin", "helm")),
		operatorNS:        env("FERROFED_E2E_OPERATOR_NAMESPACE", "ferrofed-system"),
		namespace:         env("FERROFED_E2E_NAMESPACE", "ferrofed-e2e"),
		rps:               envInt("FERROFED_E2E_RPS", 250),
		rollouts:          envInt("FERROFED_E2E_ROLLOUTS", 6),
		keep:              os.Getenv("FERROFED_E2E_KEEP") == "1",
		continueOnFailure: os.Getenv("FERROFED_E2E_CONTINUE") == "1",
		loadPath:          env("FERROFED_E2E_LOAD_PATH", "/nodes/node-a/fhir/Patient"),
		slowLoadPath:      env("FERROFED_E2E_SLOW_LOAD_PATH", "/nodes/node-b/fhir/Patient"),
		repoRoot:          root,
		stepTimeout:       3 * time.Minute,
		loadMaxLength:     8 * time.Minute,
	}
	if cfg.kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBECONFIG is not set: point it at a cluster (make e2e does, after `make cluster-up`)")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// cluster holds the clients of one run.
type cluster struct {
	rest *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func connect(t *testing.T) *cluster {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		t.Fatalf("load KUBECONFIG %s: %v", cfg.kubeconfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("reach the cluster of KUBECONFIG %s: %v", cfg.kubeconfig, err)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	t.Logf("cluster %s (%s), %d node(s)", rc.Host, v.GitVersion, len(nodes.Items))
	return &cluster{rest: rc, kube: kube, dyn: dyn}
}
