package operator_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// spoolClaim sets a persistent spool (spec.audit.spool.volumeClaimTemplate) of storage
// (none when empty) and access modes.
func spoolClaim(storage string, modes ...corev1.PersistentVolumeAccessMode) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		t := &ferrofedv1alpha1.SpoolVolumeClaimTemplate{Spec: &corev1.PersistentVolumeClaimSpec{AccessModes: modes}}
		if storage != "" {
			t.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}
		}
		if g.Spec.Audit == nil {
			g.Spec.Audit = &ferrofedv1alpha1.Audit{}
		}
		if g.Spec.Audit.Spool == nil {
			g.Spec.Audit.Spool = &ferrofedv1alpha1.AuditSpool{}
		}
		g.Spec.Audit.Spool.VolumeClaimTemplate = t
	}
}

func all(mutate ...func(*ferrofedv1alpha1.Gateway)) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		for _, m := range mutate {
			m(g)
		}
	}
}

// spoolClaimCase is a row of the persistent spool's admission table: the CRD's CEL rules
// and the webhook must give the same verdict and, when both refuse, both name the field
// (want); notWant must be in neither answer nor warning.
type spoolClaimCase struct {
	apiCase
	notWant string
}

var spoolClaimCases = []spoolClaimCase{
	{apiCase{"a persistent spool of 1Gi, ReadWriteOnce", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce)), true, true, ""},
		"the audit spool is an emptyDir"},
	{apiCase{"a persistent spool, ReadWriteOncePod", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOncePod)), true, true, ""}, ""},
	{apiCase{"sizeLimit and volumeClaimTemplate together", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce), func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit.Spool.SizeLimit = ptr.To(resource.MustParse("1Gi"))
	}), false, false, "spec.audit.spool.sizeLimit and spec.audit.spool.volumeClaimTemplate are mutually exclusive"}, ""},
	{apiCase{"a ReadWriteMany spool claim", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteMany)), false, false,
		"spec.audit.spool.volumeClaimTemplate.spec.accessModes must be set, each ReadWriteOnce or ReadWriteOncePod"}, ""},
	{apiCase{"a spool claim of ReadWriteOnce and ReadOnlyMany", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce, corev1.ReadOnlyMany)), false, false,
		"spec.audit.spool.volumeClaimTemplate.spec.accessModes must be set"}, ""},
	{apiCase{"a spool claim with no access mode", all(inline(auditRepository), spoolClaim("1Gi")), false, false,
		"spec.audit.spool.volumeClaimTemplate.spec.accessModes must be set"}, ""},
	{apiCase{"a spool claim with no storage request", all(inline(auditRepository), spoolClaim("", corev1.ReadWriteOnce)), false, false,
		"spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage is required, from 4Mi to 128Gi"}, ""},
	{apiCase{"a spool claim of 1Mi", all(inline(auditRepository), spoolClaim("1Mi", corev1.ReadWriteOnce)), false, false,
		"spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage is required, from 4Mi to 128Gi"}, ""},
	{apiCase{"a spool claim of 200Gi", all(inline(auditRepository), spoolClaim("200Gi", corev1.ReadWriteOnce)), false, false,
		"spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage is required, from 4Mi to 128Gi"}, ""},
	// Two spools of 128 MiB (audit.max_spool_bytes × 2 = 256 MiB) and the claim's file
	// system headroom (an eighth of that and 64 MiB = 96 MiB): 352Mi, to the byte. CEL
	// cannot read the TOML: it admits every size in range, the webhook refuses.
	{apiCase{"two spools and their file system headroom in exactly 352Mi", all(
		inline(auditRepository+"max_spool_bytes = 134217728\n[audit.feed]\nurl = \"https://f.example.org/fhir\"\n"),
		spoolClaim("352Mi", corev1.ReadWriteOnce)), true, true, ""}, "audit.max_spool_bytes"},
	{apiCase{"two spools and their file system headroom in a byte less than 352Mi", all(
		inline(auditRepository+"max_spool_bytes = 134217728\n[audit.feed]\nurl = \"https://f.example.org/fhir\"\n"),
		spoolClaim("369098751", corev1.ReadWriteOnce)), true, false,
		"audit.max_spool_bytes (134217728) × 2 spool(s) is 268435456 bytes; with 100663296 bytes for the claim's own file system " +
			"(an eighth of that and 64 MiB: its journal or log, inode tables, reserved blocks) the claim needs 369098752 bytes, " +
			"more than spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage (369098751, 369098751 bytes): " +
			"raise spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage to at least 352Mi, or lower audit.max_spool_bytes to at most 134217727"}, ""},
	{apiCase{"two spools of max_spool_bytes exactly the claim's storage, no headroom", all(
		inline(auditRepository+"max_spool_bytes = 134217728\n[audit.feed]\nurl = \"https://f.example.org/fhir\"\n"),
		spoolClaim("256Mi", corev1.ReadWriteOnce)), true, false,
		"more than spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage (256Mi, 268435456 bytes)"}, ""},
	{apiCase{"two spools of max_spool_bytes over the claim's storage", all(
		inline(auditRepository+"max_spool_bytes = 134217728\n[audit.feed]\nurl = \"https://f.example.org/fhir\"\n"),
		spoolClaim("200Mi", corev1.ReadWriteOnce)), true, false,
		"the claim needs 369098752 bytes, more than spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage (200Mi"}, ""},
	{apiCase{"a persistent spool with a 1s bindingsDrainTimeout draws the final-sync warning", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce),
		func(g *ferrofedv1alpha1.Gateway) { g.Spec.Lifecycle.BindingsDrainTimeout = dur("1s") }), true, true,
		"spec.lifecycle.bindingsDrainTimeout (1s) leaves less than 2s for the audit spool's final sync at shutdown: with a persistent spool"},
		"the audit spool is an emptyDir"},
	{apiCase{"one replica with a persistent spool draws the rollout warning", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce)), true, true,
		"spec.replicas is 1 with a persistent spool (spec.audit.spool.volumeClaimTemplate): a rollout replaces the one pod in place"}, ""},
	{apiCase{"two replicas with a persistent spool draw no rollout warning", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce),
		func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) }), true, true, ""}, "spec.replicas is 1"},
	{apiCase{"a persistent spool without an audit repository draws a warning", spoolClaim("1Gi", corev1.ReadWriteOnce), true, true,
		"spec.audit.spool.volumeClaimTemplate is set but the configuration has no [audit] table with destination \"repository\""}, ""},
	{apiCase{"retainOnDelete with a persistent spool", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce),
		func(g *ferrofedv1alpha1.Gateway) { g.Spec.Audit.Spool.RetainOnDelete = ptr.To(true) }), true, true, ""}, ""},
}

// TestSpoolClaimRulesOnCELAndWebhook runs the persistent spool's rows through the CRD's
// CEL rules (a namespace the webhook does not cover) and the webhook: the same verdict,
// and a refusal by both names the field in both.
func TestSpoolClaimRulesOnCELAndWebhook(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for _, tc := range spoolClaimCases {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("cel-only", "spool-case", tc.mutate)
			cel := celVerdict(ctx, t, gw.DeepCopy())
			if cel.accepted != tc.celAccept {
				t.Errorf("CEL rules %s, want %s: %s", word(cel.accepted), word(tc.celAccept), cel.reason)
			}
			wh := webhookVerdict(t, gw.DeepCopy())
			if wh.accepted != tc.webhookAccept {
				t.Errorf("webhook %s, want %s: %s", word(wh.accepted), word(tc.webhookAccept), wh.reason)
			}
			said := wh.reason + "\n" + strings.Join(wh.warnings, "\n")
			if !strings.Contains(said, tc.want) {
				t.Errorf("webhook said %q, want it to contain %q", said, tc.want)
			}
			if !tc.celAccept && !strings.Contains(cel.reason, tc.want) {
				t.Errorf("CEL said %q, want it to contain %q", cel.reason, tc.want)
			}
			if tc.notWant != "" && strings.Contains(said, tc.notWant) {
				t.Errorf("webhook said %q, want nothing of %q", said, tc.notWant)
			}
		})
	}
}
