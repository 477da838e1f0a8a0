// The usage dashboard's charts (Chart.js 4, vendored under vendor/chart.js). Data: the #ace-chart-data JSON.
document.addEventListener("DOMContentLoaded", function () {
  const source = document.getElementById("ace-chart-data");
  if (!source || typeof Chart === "undefined") {
    return;
  }
  const data = JSON.parse(source.textContent);
  const colours = ["#2563eb", "#15803d", "#a855f7", "#f59e0b"];
  const usd = (value) => "$" + Number(value).toLocaleString(undefined, { maximumFractionDigits: 2 });

  new Chart(document.getElementById("ace-trend"), {
    data: {
      labels: data.days,
      datasets: [
        ...data.tokens.map((series, i) => ({
          type: "bar",
          label: series.label + " tokens",
          data: series.data,
          backgroundColor: colours[i % colours.length],
          stack: "tokens",
          yAxisID: "tokens",
        })),
        {
          type: "line",
          label: "cost (USD)",
          data: data.cost,
          borderColor: "#dc2626",
          backgroundColor: "#dc2626",
          yAxisID: "cost",
          tension: 0.2,
        },
      ],
    },
    options: {
      maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      scales: {
        x: { stacked: true },
        tokens: { type: "linear", axis: "y", stacked: true, position: "left", title: { display: true, text: "tokens" } },
        cost: { type: "linear", axis: "y", position: "right", grid: { drawOnChartArea: false }, ticks: { callback: usd } },
      },
    },
  });

  new Chart(document.getElementById("ace-models"), {
    type: "bar",
    data: {
      labels: data.models,
      datasets: [{ label: "cost (USD)", data: data.model_cost, backgroundColor: "#dc2626" }],
    },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      plugins: { legend: { display: false } },
      scales: { x: { ticks: { callback: usd } } },
    },
  });
});
