package controllers

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

const (
	// DefaultWorkerImage is the worker image of pools that name none.
	DefaultWorkerImage = "shelljob/worker:0.1.0"
	// DefaultShell runs the commands of pools that name none.
	DefaultShell = "zsh"

	// WorkerContainer is the name of the agent's container in worker pods.
	WorkerContainer = "agent"
	// spoolVolume is the emptyDir mounted at agentapi.SpoolDir.
	spoolVolume = "spool"
	// workerTerminationGrace is short: the operator deletes a worker only
	// once it runs no job.
	workerTerminationGrace = 5
)

// ReadinessProbe is the command of a worker's readiness probe: the agent's
// ping, which succeeds only once its daemon answers.
var ReadinessProbe = []string{agentapi.AgentPath, agentapi.CmdPing}

// Environment of the agent in each worker pod, beside agentapi.ShellEnv.
const (
	EnvPool   = "SHELLJOB_POOL"
	EnvWorker = "SHELLJOB_WORKER"
)

// workerTemplate is what makes a revision: everything of the pool that
// goes into its worker pods, plus the restart stamp.
type workerTemplate struct {
	Image           string                            `json:"image"`
	ImagePullPolicy corev1.PullPolicy                 `json:"imagePullPolicy"`
	Resources       corev1.ResourceRequirements       `json:"resources"`
	ServiceAccount  string                            `json:"serviceAccount"`
	Template        shellv1alpha1.ShellPoolPodOverlay `json:"template"`
	Shell           string                            `json:"shell"`
	RestartedAt     *metav1.Time                      `json:"restartedAt"`
}

func templateOf(pool *shellv1alpha1.ShellPool, defaultImage string) workerTemplate {
	t := workerTemplate{
		Image:           pool.Spec.Image,
		ImagePullPolicy: pool.Spec.ImagePullPolicy,
		Resources:       pool.Spec.Resources,
		ServiceAccount:  pool.Spec.ServiceAccountName,
		Template:        pool.Spec.Template,
		Shell:           pool.Spec.Shell,
		RestartedAt:     pool.Spec.RestartedAt,
	}
	if t.Image == "" {
		t.Image = defaultImage
	}
	if t.ImagePullPolicy == "" {
		t.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if t.Shell == "" {
		t.Shell = DefaultShell
	}
	return t
}

// Revision is the pool's current revision: a short hash of its worker
// template and restart stamp, as a Deployment's pod-template-hash.
func Revision(pool *shellv1alpha1.ShellPool, defaultImage string) string {
	data, err := json.Marshal(templateOf(pool, defaultImage))
	if err != nil {
		panic(fmt.Sprintf("marshal a worker template: %v", err))
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// workerName is the name of a pool's worker pod.
func workerName(pool, revision string, index int32) string {
	return fmt.Sprintf("%s-%s-%d", pool, revision, index)
}

// workerPod builds worker index of the pool's revision.
func workerPod(pool *shellv1alpha1.ShellPool, revision string, index int32, defaultImage string) *corev1.Pod {
	t := templateOf(pool, defaultImage)
	labels := maps.Clone(t.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, map[string]string{
		"app.kubernetes.io/name":       "shelljob-worker",
		"app.kubernetes.io/managed-by": "shelljob-operator",
		shellv1alpha1.LabelPool:        pool.Name,
		shellv1alpha1.LabelRevision:    revision,
		shellv1alpha1.LabelWorker:      strconv.Itoa(int(index)),
	})
	podSecurity := t.Template.SecurityContext
	if podSecurity == nil {
		// The restricted profile; the image's own (numeric) user runs.
		podSecurity = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	var automount *bool
	if t.ServiceAccount == "" {
		automount = ptr.To(false)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   pool.Namespace,
			Name:        workerName(pool.Name, revision, index),
			Labels:      labels,
			Annotations: maps.Clone(t.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pool,
				shellv1alpha1.GroupVersion.WithKind("ShellPool"))},
		},
		Spec: corev1.PodSpec{
			// A worker that dies is replaced, not restarted in place: its
			// jobs end as WorkerLost, and a fresh pod takes its place.
			RestartPolicy:                 corev1.RestartPolicyNever,
			ServiceAccountName:            t.ServiceAccount,
			AutomountServiceAccountToken:  automount,
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](workerTerminationGrace),
			SecurityContext:               podSecurity,
			NodeSelector:                  t.Template.NodeSelector,
			Tolerations:                   t.Template.Tolerations,
			Containers: []corev1.Container{{
				Name:            WorkerContainer,
				Image:           t.Image,
				ImagePullPolicy: t.ImagePullPolicy,
				Command:         []string{agentapi.AgentPath},
				Env: []corev1.EnvVar{
					{Name: EnvPool, Value: pool.Name},
					{Name: EnvWorker, Value: strconv.Itoa(int(index))},
					{Name: agentapi.ShellEnv, Value: t.Shell},
				},
				Resources: t.Resources,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
						Command: ReadinessProbe,
					}},
					PeriodSeconds:    2,
					TimeoutSeconds:   5,
					FailureThreshold: 3,
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: spoolVolume, MountPath: agentapi.SpoolDir}},
			}},
			Volumes: []corev1.Volume{{
				Name:         spoolVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
			}},
		},
	}
}
