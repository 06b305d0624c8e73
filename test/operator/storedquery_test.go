package operator_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

const storedQueryDefinition = `{"resourceType":"OperationDefinition","id":"high-risk","kind":"query","code":"high-risk","resource":["Observation"],` +
	`"parameter":[{"name":"patient","use":"in","min":1,"max":"1","type":"string"}],` +
	`"extension":[{"url":"https://ferrofed.io/fhir/StructureDefinition/stored-query-template","valueExpression":{"language":"application/x-fhir-query","expression":"Observation?subject=Patient/{{%patient}}"}}]}`

func TestAStoredQueryReachesTheGatewaysConfigMap(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "queried"}
	gw := newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = withIssuer("[stored_queries]\ndrift_interval_ms = 60000\n")
	})
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, gw) }()
	sq := &ferrofedv1alpha1.StoredQuery{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "high-risk"},
		Spec:       ferrofedv1alpha1.StoredQuerySpec{GatewayName: key.Name, Definition: storedQueryDefinition},
	}
	if err := k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, sq) }()

	cmKey := types.NamespacedName{Namespace: key.Namespace, Name: gatewayspec.StoredQueriesConfigMapName(key.Name)}
	eventually(t, settle, "the StoredQuery in the ConfigMap", func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, cmKey, cm); err != nil {
			return err
		}
		if cm.Data["high-risk.json"] != storedQueryDefinition {
			return fmt.Errorf("data %v", cm.Data)
		}
		if ref := metav1.GetControllerOf(cm); ref == nil || ref.Kind != "Gateway" || ref.Name != key.Name {
			return fmt.Errorf("the ConfigMap is not controlled by the Gateway: %v", cm.OwnerReferences)
		}
		return nil
	})
	eventually(t, settle, "the Gateway owns the StoredQuery", func() error {
		got := &ferrofedv1alpha1.StoredQuery{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: sq.Name}, got); err != nil {
			return err
		}
		live := &ferrofedv1alpha1.Gateway{}
		if err := k8s.Get(ctx, key, live); err != nil {
			return err
		}
		for _, o := range got.OwnerReferences {
			if o.UID == live.UID && o.Kind == "Gateway" {
				return nil
			}
		}
		return fmt.Errorf("owners %v", got.OwnerReferences)
	})
	eventually(t, settle, "the StoredQuery says it is rendered", func() error {
		got := &ferrofedv1alpha1.StoredQuery{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: sq.Name}, got); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.RenderedConditions(), ferrofedv1alpha1.ConditionRendered); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %v", got.RenderedConditions())
		}
		return nil
	})
	t.Run("a StoredQuery naming no Gateway says so", func(t *testing.T) {
		orphan := &ferrofedv1alpha1.StoredQuery{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "orphan"},
			Spec:       ferrofedv1alpha1.StoredQuerySpec{GatewayName: "no-such-gateway", Definition: storedQueryDefinition},
		}
		if err := k8s.Create(ctx, orphan); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k8s.Delete(ctx, orphan) }()
		eventually(t, settle, "Rendered=False GatewayNotFound", func() error {
			got := &ferrofedv1alpha1.StoredQuery{}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: orphan.Name}, got); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(got.RenderedConditions(), ferrofedv1alpha1.ConditionRendered); c == nil || c.Reason != ferrofedv1alpha1.ReasonGatewayNotFound {
				return fmt.Errorf("conditions %v", got.RenderedConditions())
			}
			return nil
		})
	})
	_, dep := reconciled(ctx, t, key)
	mounted := false
	for _, m := range gatewayContainer(dep).VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			mounted = mounted || (v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cmKey.Name && m.MountPath == gatewayspec.StoredQueriesDir && m.ReadOnly)
		}
	}
	if !mounted {
		t.Errorf("the ConfigMap %s is not mounted read-only at %s", cmKey.Name, gatewayspec.StoredQueriesDir)
	}

	t.Run("spec.gatewayName is immutable", func(t *testing.T) {
		got := &ferrofedv1alpha1.StoredQuery{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: sq.Name}, got); err != nil {
			t.Fatal(err)
		}
		got.Spec.GatewayName = "other"
		if err := k8s.Update(ctx, got); !apierrors.IsInvalid(err) {
			t.Fatalf("moved to another Gateway: %v", err)
		}
	})

	if err := k8s.Delete(ctx, sq); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the deleted StoredQuery leaves the ConfigMap", func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, cmKey, cm); err != nil {
			return err
		}
		if len(cm.Data) != 0 {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})
}
