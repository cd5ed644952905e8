// Points Swagger UI at this service's own OpenAPI document. Everything the
// page loads comes from this service: no validator badge, no outside host.
window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    docExpansion: "list",
    tryItOutEnabled: false,
    persistAuthorization: false,
    displayRequestDuration: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
};
