"""The report layer: report.md, report.html, the SVG figures and the summaries."""
