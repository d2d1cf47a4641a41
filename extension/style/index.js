import 'argus-static/report.css';
import './base.css';
