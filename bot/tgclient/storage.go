package tgclient

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram/updates"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"shelljob.dev/shelljob/internal/kubeutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretSession keeps the gotd session (the auth key) in a Secret, so a
// restarted bot neither logs in again nor makes a new key.
type SecretSession struct {
	Client client.Client
	Name   types.NamespacedName
}

// sessionKey is the Secret's key that holds the session.
const sessionKey = "session.json"

var _ session.Storage = (*SecretSession)(nil)

// LoadSession implements session.Storage.
func (s *SecretSession) LoadSession(ctx context.Context) ([]byte, error) {
	var sec corev1.Secret
	if err := s.Client.Get(ctx, s.Name, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, session.ErrNotFound
		}
		return nil, fmt.Errorf("load session: %w", err)
	}
	data, ok := sec.Data[sessionKey]
	if !ok || len(data) == 0 {
		return nil, session.ErrNotFound
	}
	return data, nil
}

// StoreSession implements session.Storage.
func (s *SecretSession) StoreSession(ctx context.Context, data []byte) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Name.Namespace, Name: s.Name.Name}}
	return kubeutil.Upsert(ctx, s.Client, sec, func() error {
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[sessionKey] = data
		return nil
	})
}

// stateKey is the ConfigMap's key that holds the updates state.
const stateKey = "state.json"

// StateFlushInterval is how often a changed updates state is written to the
// cluster. After a crash the bot starts from a state at most this old and
// fetches the difference again: updates may repeat, none is lost.
const StateFlushInterval = time.Second

type stateFile struct {
	Users    map[int64]updates.State `json:"users"`
	Channels map[int64]map[int64]int `json:"channels"`
}

// ConfigMapState is the updates manager's state kept in a ConfigMap, so
// updates that arrived while the bot was down are fetched after a restart.
// It serves from memory and writes changes every StateFlushInterval (Run)
// and on Flush.
type ConfigMapState struct {
	Client client.Client
	Name   types.NamespacedName

	mu    sync.Mutex
	data  stateFile
	dirty bool
}

var _ updates.StateStorage = (*ConfigMapState)(nil)

// Load reads the stored state.
func (s *ConfigMapState) Load(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = stateFile{Users: map[int64]updates.State{}, Channels: map[int64]map[int64]int{}}
	var cm corev1.ConfigMap
	if err := s.Client.Get(ctx, s.Name, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("load updates state: %w", err)
	}
	if d := cm.Data[stateKey]; d != "" {
		if err := json.Unmarshal([]byte(d), &s.data); err != nil {
			return fmt.Errorf("read updates state: %w", err)
		}
	}
	if s.data.Users == nil {
		s.data.Users = map[int64]updates.State{}
	}
	if s.data.Channels == nil {
		s.data.Channels = map[int64]map[int64]int{}
	}
	return nil
}

// Run writes changes until ctx ends, then once more.
func (s *ConfigMapState) Run(ctx context.Context) {
	t := time.NewTicker(StateFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.Flush(fctx)
			cancel()
			return
		case <-t.C:
			_ = s.Flush(ctx)
		}
	}
}

// Flush writes the state if it changed.
func (s *ConfigMapState) Flush(ctx context.Context) error {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	data, err := json.Marshal(s.data)
	s.dirty = false
	s.mu.Unlock()
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Name.Namespace, Name: s.Name.Name}}
	err = kubeutil.Upsert(ctx, s.Client, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[stateKey] = string(data)
		return nil
	})
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("store updates state: %w", err)
	}
	return nil
}

func (s *ConfigMapState) update(userID int64, f func(*updates.State)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.data.Users[userID]
	if !ok {
		return fmt.Errorf("no updates state for user %d", userID)
	}
	f(&st)
	s.data.Users[userID] = st
	s.dirty = true
	return nil
}

// GetState implements updates.StateStorage.
func (s *ConfigMapState) GetState(_ context.Context, userID int64) (updates.State, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.data.Users[userID]
	return st, ok, nil
}

// SetState implements updates.StateStorage.
func (s *ConfigMapState) SetState(_ context.Context, userID int64, st updates.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data.Users == nil {
		s.data.Users = map[int64]updates.State{}
	}
	s.data.Users[userID] = st
	if s.data.Channels == nil {
		s.data.Channels = map[int64]map[int64]int{}
	}
	s.data.Channels[userID] = map[int64]int{}
	s.dirty = true
	return nil
}

// SetPts implements updates.StateStorage.
func (s *ConfigMapState) SetPts(_ context.Context, userID int64, pts int) error {
	return s.update(userID, func(st *updates.State) { st.Pts = pts })
}

// SetQts implements updates.StateStorage.
func (s *ConfigMapState) SetQts(_ context.Context, userID int64, qts int) error {
	return s.update(userID, func(st *updates.State) { st.Qts = qts })
}

// SetDate implements updates.StateStorage.
func (s *ConfigMapState) SetDate(_ context.Context, userID int64, date int) error {
	return s.update(userID, func(st *updates.State) { st.Date = date })
}

// SetSeq implements updates.StateStorage.
func (s *ConfigMapState) SetSeq(_ context.Context, userID int64, seq int) error {
	return s.update(userID, func(st *updates.State) { st.Seq = seq })
}

// SetDateSeq implements updates.StateStorage.
func (s *ConfigMapState) SetDateSeq(_ context.Context, userID int64, date, seq int) error {
	return s.update(userID, func(st *updates.State) { st.Date, st.Seq = date, seq })
}

// GetChannelPts implements updates.StateStorage.
func (s *ConfigMapState) GetChannelPts(_ context.Context, userID, channelID int64) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pts, ok := s.data.Channels[userID][channelID]
	return pts, ok, nil
}

// SetChannelPts implements updates.StateStorage.
func (s *ConfigMapState) SetChannelPts(_ context.Context, userID, channelID int64, pts int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data.Channels == nil {
		s.data.Channels = map[int64]map[int64]int{}
	}
	if s.data.Channels[userID] == nil {
		s.data.Channels[userID] = map[int64]int{}
	}
	s.data.Channels[userID][channelID] = pts
	s.dirty = true
	return nil
}

// ForEachChannels implements updates.StateStorage.
func (s *ConfigMapState) ForEachChannels(ctx context.Context, userID int64, f func(ctx context.Context, channelID int64, pts int) error) error {
	s.mu.Lock()
	chans := make(map[int64]int, len(s.data.Channels[userID]))
	for k, v := range s.data.Channels[userID] {
		chans[k] = v
	}
	s.mu.Unlock()
	for id, pts := range chans {
		if err := f(ctx, id, pts); err != nil {
			return err
		}
	}
	return nil
}
