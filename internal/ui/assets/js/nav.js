// In-app navigation without a reload: main.js shows the page of the new
// location when it hears htq:navigate.

/** navigate goes to an in-app path. */
export function navigate(href) {
  history.pushState(null, '', href);
  window.dispatchEvent(new Event('htq:navigate'));
}
