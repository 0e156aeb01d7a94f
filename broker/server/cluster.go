package server

import (
	"sort"

	"github.com/faultline/faultline/broker/metadata"
)

// Helpers shared by the handlers that describe the cluster (Metadata,
// DescribeCluster, Produce's leader hints).

// clusterID prefers the Backend's id (known from meta.properties before
// the image is loaded) over the image's.
func (s *Server) clusterID() string {
	if s.backend.ClusterID != "" {
		return s.backend.ClusterID
	}
	if img := s.backend.Metadata.Image(); img != nil {
		return img.ClusterID
	}
	return ""
}

// liveBrokers returns the brokers clients may use, sorted by id: the
// unfenced brokers of the image, or this node alone while the image lists
// none (a node that has not registered yet still answers its clients).
// includeFenced adds fenced brokers.
func (s *Server) liveBrokers(img *metadata.Image, includeFenced bool) []metadata.Broker {
	var out []metadata.Broker
	if img != nil {
		for _, b := range img.Brokers {
			if !b.Fenced || includeFenced {
				out = append(out, b)
			}
		}
	}
	if len(out) == 0 {
		out = append(out, s.self())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) self() metadata.Broker {
	return metadata.Broker{ID: s.backend.NodeID, Host: s.backend.AdvertisedHost, Port: s.backend.AdvertisedPort}
}

// controllerID names a live broker for admin requests: the active
// controller when clients can reach it, otherwise this node (its Controller
// forwards to the active controller, as KRaft brokers do).
func (s *Server) controllerID(img *metadata.Image, live []metadata.Broker) int32 {
	if img != nil {
		for _, b := range live {
			if b.ID == img.ControllerID {
				return b.ID
			}
		}
	}
	for _, b := range live {
		if b.ID == s.backend.NodeID {
			return b.ID
		}
	}
	return live[0].ID
}

// broker returns the broker with the given id, from the image or this node.
func (s *Server) broker(img *metadata.Image, id int32) (metadata.Broker, bool) {
	if img != nil {
		if b, ok := img.Brokers[id]; ok {
			return b, true
		}
	}
	if id == s.backend.NodeID {
		return s.self(), true
	}
	return metadata.Broker{}, false
}

func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}

// internalTopic reports whether clients see the topic as internal.
func internalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

// validTopicName applies Kafka's topic name rules: 1-249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
