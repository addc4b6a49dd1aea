/*

pynq-kv: register slice (skid buffer) for a valid/ready stream

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * A full-throughput register slice: one word per cycle passes with one cycle
 * of latency, and no combinational path joins the two sides (s_ready,
 * m_data and m_valid all come from registers).  It cuts a timing path where
 * the ready of one block would otherwise run through the valid/ready logic
 * of the next (docs/rtl.md, Timing): the front-end puts one between the
 * admission check and the walker and on both engine streams, kv_engine_top
 * one on the mailbox's responses.
 *
 * Two words of storage: the output register and a skid register that takes
 * the word accepted in the cycle m_ready falls (s_ready was already high).
 * Words leave in the order they came.
 */
module kv_skid #
(
    // Width of a word in bits: 1 or more
    parameter WIDTH = 8
)
(
    input  wire                 clk,
    input  wire                 rst,

    input  wire [WIDTH-1:0]     s_data,
    input  wire                 s_valid,
    output wire                 s_ready,

    output wire [WIDTH-1:0]     m_data,
    output wire                 m_valid,
    input  wire                 m_ready
);

// check configuration
initial begin
    if (WIDTH < 1) begin
        $error("Error: WIDTH must be at least 1 (instance %m)");
        $finish;
    end
end

reg [WIDTH-1:0] out_data_reg;
reg out_valid_reg;
reg [WIDTH-1:0] skid_data_reg;
reg skid_valid_reg;

assign s_ready = !skid_valid_reg;
assign m_data = out_data_reg;
assign m_valid = out_valid_reg;

wire take = s_valid && !skid_valid_reg;
wire out_free = !out_valid_reg || m_ready;

always @(posedge clk) begin
    if (out_free) begin
        // the output register refills from the skid register first, else from the input
        if (skid_valid_reg) begin
            out_data_reg <= skid_data_reg;
        end else begin
            out_data_reg <= s_data;
        end
    end else if (take) begin
        skid_data_reg <= s_data;
    end
end

always @(posedge clk) begin
    if (rst) begin
        out_valid_reg <= 1'b0;
        skid_valid_reg <= 1'b0;
    end else if (out_free) begin
        out_valid_reg <= skid_valid_reg || take;
        skid_valid_reg <= 1'b0;
    end else if (take) begin
        skid_valid_reg <= 1'b1;
    end
end

endmodule

`resetall
