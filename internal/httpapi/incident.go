package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/incident"
)

// IncidentViewer builds the incident view. *incident.Fleet implements it.
type IncidentViewer interface {
	View(ctx context.Context) incident.View
}

var _ IncidentViewer = (*incident.Fleet)(nil)

func (a *API) getIncident(c *gin.Context) {
	c.JSON(http.StatusOK, a.cfg.Incident.View(c.Request.Context()))
}
