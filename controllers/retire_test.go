package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

func TestParseBacklog(t *testing.T) {
	for _, tc := range []struct {
		name, page     string
		records, bytes int64
		err            string
	}{
		{name: "one destination", page: "# HELP x\nferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"} 2\nferrofed_audit_spool_undelivered_bytes{destination=\"audit_repository\"} 8192\n", records: 2, bytes: 8192},
		{name: "two destinations are summed", page: "ferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"} 2\nferrofed_audit_spool_undelivered_records{destination=\"audit_feed\"} 3\nferrofed_audit_spool_undelivered_bytes{destination=\"audit_feed\"} 10\n", records: 5, bytes: 10},
		{name: "empty spools", page: "ferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"} 0\nferrofed_audit_spool_undelivered_bytes{destination=\"audit_repository\"} 0\n", records: 0, bytes: 0},
		{name: "a value in exponent form", page: "ferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"} 1.5e+06\n", records: 1500000},
		{name: "no gauge: an older image", page: "ferrofed_audit_undelivered_at_exit{destination=\"audit_repository\"} 0\n", err: "have no ferrofed_audit_spool_undelivered_records"},
		{name: "a longer name is another metric", page: "ferrofed_audit_spool_undelivered_records_total 4\n", err: "have no"},
		{name: "a negative value", page: "ferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"} -1\n", err: "of value"},
		{name: "not a number", page: "ferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"} NaN\n", err: "of value"},
		{name: "no value", page: "ferrofed_audit_spool_undelivered_records{destination=\"audit_repository\"}\n", err: "without a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records, size, err := parseBacklog(strings.NewReader(tc.page))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || records != tc.records || size != tc.bytes {
				t.Fatalf("%d records, %d bytes, %v; want %d, %d", records, size, err, tc.records, tc.bytes)
			}
		})
	}
}

func TestMetricsURL(t *testing.T) {
	gw := func(mutate func(*ferrofedv1alpha1.Gateway)) *ferrofedv1alpha1.Gateway {
		g := &ferrofedv1alpha1.Gateway{}
		if mutate != nil {
			mutate(g)
		}
		return g
	}
	for _, tc := range []struct {
		name     string
		gw       *ferrofedv1alpha1.Gateway
		rendered string
		ip       string
		want     string
		err      string
	}{
		{name: "defaults", gw: gw(nil), ip: "10.1.2.3", want: "http://10.1.2.3:8080/metrics"},
		{name: "base path, port and metrics.path", gw: gw(func(g *ferrofedv1alpha1.Gateway) { g.Spec.BasePath, g.Spec.Port = "/gw", 9443 }),
			rendered: "[auth]\ndata_plane = \"open\"\n[metrics]\npath = \"/prom\"\n", ip: "10.1.2.3", want: "http://10.1.2.3:9443/gw/prom"},
		{name: "TLS", gw: gw(func(g *ferrofedv1alpha1.Gateway) { g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "tls"} }), ip: "10.1.2.3", want: "https://10.1.2.3:8080/metrics"},
		{name: "IPv6", gw: gw(nil), ip: "fd00::7", want: "http://[fd00::7]:8080/metrics"},
		{name: "no IP", gw: gw(nil), err: "no IP"},
		{name: "metrics disabled", gw: gw(nil), rendered: "[auth]\ndata_plane = \"open\"\n[metrics]\ndisabled = true\n", ip: "10.1.2.3", err: "metrics.disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metricsURL(tc.gw, []byte(tc.rendered), tc.ip)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%q, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRetireAction(t *testing.T) {
	pod := func(hash string, owner string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{}}}
		if hash != "" {
			p.Labels[labelPodTemplateHash] = hash
		}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner, Controller: ptr.To(true)}}
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	live := map[string]bool{"gw-live": true}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "its ReplicaSet is being deleted", pod: pod("abc", "gw-gone", false), want: true},
		{name: "no owner left (the garbage collector orphaned it)", pod: pod("abc", "", false), want: true},
		{name: "a live ReplicaSet still manages it", pod: pod("abc", "gw-live", false), want: false},
		{name: "being deleted", pod: pod("abc", "", true), want: false},
		{name: "no Deployment pod (a StatefulSet's)", pod: pod("", "", false), want: false},
	} {
		if got := retireAction(tc.pod, live); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

// A merge patch of status.audit writes it whole: an emptied list or count is null, so
// that the patch removes what the previous one wrote (a retiring pod deleted must leave
// the list).
func TestAuditPatchNullsWhatIsGone(t *testing.T) {
	v, err := auditPatch(&ferrofedv1alpha1.AuditStatus{UndeliveredRecords: 3})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(v)
	for _, want := range []string{`"claims":null`, `"retiringPods":null`, `"claimsNotListed":null`, `"undeliveredRecords":3`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s has no %s", data, want)
		}
	}
	if v, _ := auditPatch(nil); v != nil {
		t.Errorf("no audit: %v, want null", v)
	}
}

func TestAuditConditionCountsRetiringPods(t *testing.T) {
	st := withRetiring(nil, retiringResult{held: 1, records: 7, bytes: 4096,
		pods: []ferrofedv1alpha1.RetiringPodStatus{{Name: "gw-abc-1", UndeliveredRecords: 7, UndeliveredBytes: 4096}}})
	if st == nil || st.UndeliveredRecords != 7 || len(st.RetiringPods) != 1 {
		t.Fatalf("status.audit %+v", st)
	}
	c := auditCondition(st)
	if c.Status != metav1.ConditionFalse || c.Reason != ferrofedv1alpha1.ReasonRetiringPodsDelivering || !strings.Contains(c.Message, "gw-abc-1") {
		t.Fatalf("AuditDelivering %+v", c)
	}
	if withRetiring(nil, retiringResult{}) != nil {
		t.Fatal("no retiring pod and no claim made a status.audit")
	}
}
