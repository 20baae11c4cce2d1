// Starts Swagger UI on /api/docs (lifebot's own script: no inline code under the page's CSP).
// Everything it loads comes from lifebot; the validator badge, which would call another
// host, is off.
"use strict";

window.addEventListener("DOMContentLoaded", function () {
  if (!window.SwaggerUIBundle) return;
  window.ui = window.SwaggerUIBundle({
    url: "/api/openapi.json",
    dom_id: "#swagger-ui",
    validatorUrl: null,
    deepLinking: false,  // its links sit inside the operation buttons (nested controls)
    persistAuthorization: false,
    tryItOutEnabled: false,
  });
});
