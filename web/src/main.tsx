import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './app.js';
import './styles/base.css';
import './styles/layout.css';
// By area, in cascade order: later files may override earlier ones (narrow.css overrides the tables).
import './styles/controls.css';
import './styles/tables.css';
import './styles/auth.css';
import './styles/widgets.css';
import './styles/request-detail.css';
import './styles/usage.css';
import './styles/limits.css';
import './styles/narrow.css';
import './styles/date-range.css';
import './styles/bodies.css';
import './styles/notices.css';
import './styles/team.css';
import './styles/reconcile.css';
import './styles/views.css';

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
