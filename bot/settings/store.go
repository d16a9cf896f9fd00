package settings

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"shelljob.dev/shelljob/internal/kubeutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Store keeps each admin's settings.
type Store interface {
	// Get returns the settings of user, the defaults for those never chosen.
	Get(ctx context.Context, user int64) (Prefs, error)
	// Set stores the settings of user.
	Set(ctx context.Context, user int64, p Prefs) error
}

// stored is what is kept per user: only the values that differ from the
// defaults, so a changed default reaches everyone who never chose.
type stored map[Setting]string

// Encode returns the stored form of p.
func Encode(p Prefs) ([]byte, error) {
	s := stored{}
	for _, k := range []Setting{Private, Groups, Final, Render} {
		if v := p.Value(k); v != Defaults.Value(k) {
			s[k] = v
		}
	}
	return json.Marshal(s)
}

// Decode reads the stored form. A value this version does not know is read
// as its default and reported through log, and so is data that is not a
// JSON object, so .a still answers.
func Decode(data []byte, log logr.Logger) Prefs {
	p := Defaults
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		log.Info("Settings are not a JSON object; reading the defaults", "error", err.Error())
		return p
	}
	for k, v := range raw {
		var word string
		if err := json.Unmarshal(v, &word); err != nil {
			log.Info("Unknown stored setting value; reading its default", "setting", k, "value", string(v))
			continue
		}
		c, ok := ParseChange([]string{k, word})
		if !ok {
			log.Info("Unknown stored setting value; reading its default", "setting", k, "value", word)
			continue
		}
		p = p.Apply(c)
	}
	return p
}

// MemoryStore keeps settings in memory, stored as Encode does. Fail, when
// set, makes Set fail, as a store that cannot save would.
type MemoryStore struct {
	Log  logr.Logger
	Fail error

	mu   sync.Mutex
	data map[int64][]byte
}

// SetFail sets Fail under the store's lock.
func (m *MemoryStore) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Fail = err
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, user int64) (Prefs, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.data[user]; ok {
		return Decode(d, m.Log), nil
	}
	return Defaults, nil
}

// Set implements Store.
func (m *MemoryStore) Set(_ context.Context, user int64, p Prefs) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	d, err := Encode(p)
	if err != nil {
		return err
	}
	if m.data == nil {
		m.data = map[int64][]byte{}
	}
	m.data[user] = d
	return nil
}

// SetRaw stores data for user as it is, as a hand edit would.
func (m *MemoryStore) SetRaw(user int64, data string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data = map[int64][]byte{}
	}
	m.data[user] = []byte(data)
}

// ConfigMapStore keeps settings in one ConfigMap, a key per user id whose
// value is the stored form.
type ConfigMapStore struct {
	Client client.Client
	// Name is the ConfigMap's namespace and name.
	Name types.NamespacedName
	Log  logr.Logger
}

// Get implements Store.
func (s *ConfigMapStore) Get(ctx context.Context, user int64) (Prefs, error) {
	var cm corev1.ConfigMap
	if err := s.Client.Get(ctx, s.Name, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return Defaults, nil
		}
		return Defaults, fmt.Errorf("get settings: %w", err)
	}
	d, ok := cm.Data[strconv.FormatInt(user, 10)]
	if !ok {
		return Defaults, nil
	}
	return Decode([]byte(d), s.Log.WithValues("user", user)), nil
}

// Set implements Store.
func (s *ConfigMapStore) Set(ctx context.Context, user int64, p Prefs) error {
	d, err := Encode(p)
	if err != nil {
		return err
	}
	key := strconv.FormatInt(user, 10)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Name.Namespace, Name: s.Name.Name}}
	return kubeutil.Upsert(ctx, s.Client, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if string(d) == "{}" {
			delete(cm.Data, key)
		} else {
			cm.Data[key] = string(d)
		}
		return nil
	})
}
